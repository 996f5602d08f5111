//! Retrieval fixtures shared by the unit tests and `tests/e5.rs`: the first articles of eight
//! laws from the project's corpus (statutes are outside copyright, PRC Copyright Law Art. 5), and
//! two English paragraphs, with questions that paraphrase them.
#![allow(dead_code)]

/// (title, paragraph)
pub const PARAGRAPHS: &[(&str, &str)] = &[
    (
        "上海市养犬管理条例",
        "第二条 本市行政区域内犬只的饲养、经营以及相关管理活动，适用本条例。第三条 养犬管理实行政府部门监管、养犬人自律、基层组织参与、社会公众监督相结合的原则。第四条 市和区、县人民政府应当加强对养犬管理工作的领导。市和区、县人民政府建立由公安、兽医、城管执法、工商行政、住房保障房屋管理、卫生等部门参加的养犬管理工作协调机构，组织、指导和监督养犬管理工作，协调解决养犬管理工作中的重大问题。",
    ),
    (
        "中华人民共和国个人信息保护法",
        "第二条 自然人的个人信息受法律保护，任何组织、个人不得侵害自然人的个人信息权益。第三条 在中华人民共和国境内处理自然人个人信息的活动，适用本法。第四条 个人信息是以电子或者其他方式记录的与已识别或者可识别的自然人有关的各种信息，不包括匿名化处理后的信息。第五条 处理个人信息应当遵循合法、正当、必要和诚信原则，不得通过误导、欺诈、胁迫等方式处理个人信息。第六条 处理个人信息应当具有明确、合理的目的，并应当与处理目的直接相关，采取对个人权益影响最小的方式。",
    ),
    (
        "上海市防汛条例",
        "第二条 本市行政区域内防御和减轻台风、暴雨、高潮和洪水引起的灾害的活动，适用本条例。第三条 防汛工作实行全面规划、统筹兼顾、预防为主、及时抢险、局部利益服从全局利益的原则。第四条 各级人民政府应当加强对防汛工作的统一领导，组织有关部门、单位，动员社会力量，做好防汛工作。防汛工作实行行政首长负责制，统一指挥、分级分部门负责。第五条 市和区水行政主管部门在同级人民政府的领导下，负责本辖区内防汛的组织、协调、监督和指导等日常工作。区水行政主管部门业务上受市水行政主管部门的指导。",
    ),
    (
        "上海市殡葬管理条例",
        "第二条 本条例适用于本市行政区域内的殡葬活动及其管理。第三条 本市殡葬活动及其管理的原则是：实行火葬，节约殡葬用地，保护环境，公益惠民，弘扬中华民族美德，革除殡葬陋俗，维护逝者尊严，提倡文明节俭办丧事。第四条 市、区人民政府应当将殡葬事业纳入国民经济和社会发展规划，完善殡葬公共服务制度。第五条 民政部门应当依托政务服务“一网通办”平台，为公众提供殡葬服务信息查询、政策咨询，以及网上业务办理等服务。",
    ),
    (
        "上海市志愿服务条例",
        "第二条 本条例适用于在本市行政区域内开展或者发起的志愿服务以及与志愿服务有关的活动。第三条 本条例所称的志愿服务，是指不以获取报酬为目的，自愿以智力、体力、技能等为他人和社会提供服务和帮助的公益性活动。第四条 志愿服务活动应当遵循自愿、平等、诚信、合法的原则。第五条 本市鼓励为老年人、未成年人、残疾人、失业人员等有困难需要帮助的社会群体和个人提供志愿服务；提倡在教育、科学、文化、卫生、体育、环保等领域以及社区服务、应急援助和社会公益活动中开展志愿服务活动。",
    ),
    (
        "北京市烟花爆竹安全管理规定",
        "第二条 在本市行政区域内生产、销售、储存、运输、燃放烟花爆竹的安全管理工作适用本规定。法律、法规另有规定的，从其规定。第三条 本规定由本市各级人民政府组织实施。公安机关是烟花爆竹安全管理工作的主管机关。第四条 本市各级人民政府、街道办事处和居民委员会、村民委员会，以及机关、团体、企事业单位和其他组织，应当开展依法、文明、安全燃放烟花爆竹的宣传、教育活动。第五条 市和区、县人民政府对举报违法生产、销售、储存、运输烟花爆竹的人员予以奖励。",
    ),
    (
        "枣庄市古树名木保护条例",
        "第二条 本市行政区域内古树名木以及古树后续资源（以下统称古树名木）的保护管理，适用本条例。第三条 古树名木保护实行属地管理、分级保护，坚持政府主导与社会参与相结合的原则。第四条 市、区（市）人民政府负责组织领导本行政区域内古树名木的保护管理工作，并将古树名木的保护纳入城乡总体规划。第五条 林业、城市绿化部门为古树名木保护主管部门（以下统称古树名木主管部门）。林业部门负责城市建成区以外的古树名木保护管理工作；城市绿化部门负责城市建成区以内的古树名木保护管理工作。",
    ),
    (
        "北京市自动驾驶汽车条例",
        "第二条 在本市行政区域内开展自动驾驶汽车技术创新，基础设施规划建设，道路测试、示范应用、道路应用试点等活动，适用本条例。第三条 本市自动驾驶汽车产业发展，坚持创新驱动、市场主导、开放合作、公平竞争的原则，鼓励多种技术路线发展及融合。第四条 市人民政府应当加强对本市自动驾驶汽车相关工作的领导，将推动自动驾驶汽车发展纳入国民经济和社会发展规划、年度计划，建立健全协调机制，统筹区域发展布局，优化发展环境。",
    ),
    (
        "Residential tenancy",
        "Tenants must give the landlord at least thirty days' written notice before ending a monthly lease. The landlord shall return the security deposit within fourteen days after the tenant moves out, minus documented costs of repairing damage beyond normal wear and tear.",
    ),
    (
        "Working hours",
        "Employees who work more than forty hours in a week are entitled to overtime pay at one and a half times their regular hourly rate. Employers shall keep accurate records of the hours worked by each employee for at least three years.",
    ),
];

/// (question, index of the paragraph that answers it); none shares a sentence with its paragraph.
pub const PARAPHRASES: &[(&str, usize)] = &[
    ("在上海养狗由哪些部门来管理？", 0),
    ("企业能不能用欺骗手段收集别人的隐私数据？", 1),
    ("台风暴雨引发洪涝灾害时由谁统一指挥？", 2),
    ("人去世以后提倡火化和节俭办丧事吗？", 3),
    ("做义工可以拿报酬吗？", 4),
    ("过年放鞭炮归哪个机关管？", 5),
    ("城区里的老树由哪个部门负责保护？", 6),
    ("无人驾驶汽车上路测试适用哪部法规？", 7),
    (
        "How much notice must I give before moving out of my flat?",
        8,
    ),
    ("Do I get paid extra for working more hours?", 9),
    ("Who regulates dog ownership in Shanghai?", 0),
    (
        "Can companies collect personal data by deceiving people?",
        1,
    ),
];
