// The least-privilege check of scripts/iam-check.sh: every request the functions made during the
// drill (moto's request recording, and the Bedrock stand-in's, one access key per function),
// replayed through an IAM policy simulator against that function's role as deployed: the roles of
// template.yaml *after SAM's transform* (scripts/deploy_check.py --translate-only writes it),
// filled in for the local bucket, queues and secrets.
//
//   node scripts/iam/check.mjs --template TRANSLATED.json --recording REC.jsonl[,REC2.jsonl] \
//        --values VALUES.json --managed-policies scripts/iam/managed-policies.json [--report REPORT.json]
//
// A function (AWS::Lambda::Function, named by its Metadata's Binary) has the role its Role names:
// that AWS::IAM::Role's inline Policies (SAM's policy templates already expanded by SAM), every
// AWS::IAM::Policy attached to it (the event sources' consume policies among them), and its managed
// policies, which must be on the allowlist of managed-policies.json (AWSLambdaBasicExecutionRole,
// AWSLambdaVPCAccessExecutionRole, AWSXrayWriteOnlyAccess: evaluated with the statements AWS
// publishes for them, which grant none of the S3, SQS, Secrets Manager or Bedrock calls). A role
// with any other managed policy (SAM's AWSLambdaSQSQueueExecutionRole: receive and delete on every
// queue) fails the check.
//
// S3 answers 403, not 404, for a key that does not exist unless the caller may also list the
// bucket under that key, and moto answers 404 whatever the policy says. So every s3:GetObject
// (GET or HEAD of an object) must also be covered by s3:ListBucket on the bucket with s3:prefix set
// to the key; otherwise "object missing" would be an endless AccessDenied in AWS.
//
// Bedrock: POST /model/<modelId>/invoke is bedrock:InvokeModel on
// arn:aws:bedrock:<region>::foundation-model/<modelId>.
//
// EventBridge: each entry of a PutEvents is events:PutEvents on its bus (EventBusName, a name or an
// ARN; none is the account's default bus), with events:source and events:detail-type as context.
// Beside the recorded calls, probes evaluate each role as IAM would for calls no function should
// make: a function with DOCPIPE_EVENT_BUS may PutEvents on that bus (the stack's, as the template
// resolves it, which must be the drill's bus), and not on the default bus, another bus, or the same
// name in another account; no other events action (PutRule, PutTargets, DeleteEventBus, …) on it;
// a function without the variable may not PutEvents on the bus at all.
//
// Exit status 1 when a function made a call its role does not allow, a GET/HEAD the 403 rule
// catches, a request this script cannot map to an IAM action, a role carries a managed policy off
// the allowlist, an EventBridge probe has the wrong answer, or when a function made no call at all
// (its key was not applied, or the drill did not run it).

import { createRequire } from 'node:module'
import fs from 'node:fs'
import path from 'node:path'

const args = Object.fromEntries(
  process.argv.slice(2).reduce((pairs, arg, i, all) => {
    if (arg.startsWith('--')) pairs.push([arg.slice(2), all[i + 1]])
    return pairs
  }, [])
)
for (const required of ['template', 'recording', 'values', 'managed-policies']) {
  if (!args[required]) {
    console.error(`usage: check.mjs --${required} … (see the header of this file)`)
    process.exit(2)
  }
}
// The packages live where scripts/iam-check.sh installed them (IAM_CHECK_NODE_MODULES).
const modules = path.resolve(process.env.IAM_CHECK_NODE_MODULES || 'node_modules')
const require = createRequire(path.join(modules, 'noop.js'))
const YAML = require('yaml')
const { runSimulation } = require('@cloud-copilot/iam-simulate')

const values = JSON.parse(fs.readFileSync(args.values, 'utf8'))
const managedPolicies = JSON.parse(fs.readFileSync(args['managed-policies'], 'utf8')).policies

// ───────────────────────────── the template, filled in ─────────────────────────────

const TAGS = {
  Ref: 'Ref', Sub: 'Fn::Sub', GetAtt: 'Fn::GetAtt', If: 'Fn::If', Equals: 'Fn::Equals',
  Not: 'Fn::Not', And: 'Fn::And', Or: 'Fn::Or', Join: 'Fn::Join', Select: 'Fn::Select',
  Split: 'Fn::Split', FindInMap: 'Fn::FindInMap', Base64: 'Fn::Base64', Condition: 'Condition',
  GetAZs: 'Fn::GetAZs', ImportValue: 'Fn::ImportValue', Cidr: 'Fn::Cidr'
}
const customTags = []
for (const [short, long] of Object.entries(TAGS)) {
  const wrap = (v) => ({
    [long]: short === 'GetAtt' && typeof v === 'string' ? v.split(/\.(.*)/s).slice(0, 2) : v
  })
  customTags.push({ tag: `!${short}`, resolve: (s) => wrap(s) })
  customTags.push({ tag: `!${short}`, collection: 'seq', resolve: (seq) => wrap(seq.toJSON()) })
  customTags.push({ tag: `!${short}`, collection: 'map', resolve: (map) => wrap(map.toJSON()) })
}
const template = YAML.parse(fs.readFileSync(args.template, 'utf8'), { customTags })
const resources = template.Resources

const NO_VALUE = Symbol('AWS::NoValue')
const pseudo = {
  'AWS::StackName': values.stack_name,
  'AWS::AccountId': values.account_id,
  'AWS::Region': values.region,
  'AWS::Partition': 'aws',
  'AWS::URLSuffix': 'amazonaws.com',
  'AWS::NoValue': NO_VALUE
}
const parameters = {}
for (const [name, p] of Object.entries(template.Parameters || {})) {
  if (name in (values.parameters || {})) parameters[name] = values.parameters[name]
  else if ('Default' in p) parameters[name] = p.Default
  else parameters[name] = `<${name}>` // no default and not filled in: no policy here names it
}

function queueName (id) {
  const name = values.queues[id]
  if (!name) throw new Error(`the template's queue ${id} has no local queue in the values file`)
  return name
}
const arn = {
  queue: (id) => `arn:aws:sqs:${values.region}:${values.account_id}:${queueName(id)}`,
  fn: (id) => `arn:aws:lambda:${values.region}:${values.account_id}:function:${id}`,
  bus: (name, account = values.account_id) =>
    name.startsWith('arn:') ? name : `arn:aws:events:${values.region}:${account}:event-bus/${name}`
}

function refOf (id) {
  if (id in pseudo) return pseudo[id]
  if (id in parameters) return parameters[id]
  const r = resources[id]
  if (!r) throw new Error(`Ref ${id}: no such parameter or resource`)
  switch (r.Type) {
    case 'AWS::SQS::Queue':
      return `${values.endpoint}/${values.account_id}/${queueName(id)}`
    case 'AWS::S3::Bucket':
      return evaluate(r.Properties.BucketName)
    case 'AWS::Events::EventBus':
      return evaluate(r.Properties.Name) // Ref is the bus's name
    default:
      return id
  }
}

function getAtt (id, attr) {
  const r = resources[id]
  if (!r) throw new Error(`!GetAtt ${id}.${attr}: no such resource`)
  if (r.Type === 'AWS::SQS::Queue') {
    if (attr === 'Arn') return arn.queue(id)
    if (attr === 'QueueName') return queueName(id)
    if (attr === 'QueueUrl') return refOf(id)
  }
  if (r.Type === 'AWS::Lambda::Function' && attr === 'Arn') return arn.fn(id)
  if (r.Type === 'AWS::IAM::Role' && attr === 'Arn') return `arn:aws:iam::${values.account_id}:role/${id}`
  if (r.Type === 'AWS::S3::Bucket' && attr === 'Arn') return `arn:aws:s3:::${refOf(id)}`
  if (r.Type === 'AWS::Events::EventBus' && attr === 'Name') return refOf(id)
  if (r.Type === 'AWS::Events::EventBus' && attr === 'Arn') return arn.bus(refOf(id))
  throw new Error(`!GetAtt ${id}.${attr}: not modelled by this check`)
}

const conditionCache = {}
function condition (name) {
  if (!(name in conditionCache)) {
    const c = template.Conditions?.[name]
    if (c === undefined) throw new Error(`condition ${name} is not defined`)
    conditionCache[name] = Boolean(evaluate(c))
  }
  return conditionCache[name]
}

function sub (text, vars = {}) {
  return text.replace(/\$\{([^}]+)\}/g, (whole, name) => {
    if (name.startsWith('!')) return '${' + name.slice(1) + '}'
    if (name in vars) return evaluate(vars[name])
    if (name.includes('.')) {
      const [id, attr] = name.split(/\.(.*)/s)
      return getAtt(id, attr)
    }
    const v = refOf(name)
    if (v === NO_VALUE) throw new Error(`!Sub ${text}: ${name} is AWS::NoValue`)
    return v
  })
}

function evaluate (node) {
  if (Array.isArray(node)) return node.map(evaluate).filter((v) => v !== NO_VALUE)
  if (node === null || typeof node !== 'object') return node
  const keys = Object.keys(node)
  if (keys.length === 1) {
    const [k] = keys
    const v = node[k]
    switch (k) {
      case 'Ref': return refOf(v)
      case 'Fn::GetAtt': return getAtt(...(Array.isArray(v) ? v : v.split(/\.(.*)/s)))
      case 'Fn::Sub': return Array.isArray(v) ? sub(v[0], v[1]) : sub(v)
      case 'Fn::If': return condition(v[0]) ? evaluate(v[1]) : evaluate(v[2])
      case 'Fn::Equals': return String(evaluate(v[0])) === String(evaluate(v[1]))
      case 'Fn::Not': return !evaluate(v[0])
      case 'Fn::And': return v.every((c) => evaluate(c))
      case 'Fn::Or': return v.some((c) => evaluate(c))
      case 'Condition': return condition(v)
      case 'Fn::Join': return evaluate(v[1]).join(v[0])
      case 'Fn::Select': return evaluate(v[1])[Number(evaluate(v[0]))]
      case 'Fn::Split': return String(evaluate(v[1])).split(v[0])
      default:
        if (k.startsWith('Fn::')) throw new Error(`${k} is not modelled by this check`)
    }
  }
  const out = {}
  for (const [k, v] of Object.entries(node)) {
    const e = evaluate(v)
    if (e !== NO_VALUE) out[k] = e
  }
  return out
}

/// Every statement of a function's role, each with where it came from; and the managed policies
/// off the allowlist.
function roleStatements (fnId) {
  const roleRef = resources[fnId].Properties.Role
  const roleId = roleRef?.['Fn::GetAtt']?.[0]
  if (!roleId || resources[roleId]?.Type !== 'AWS::IAM::Role') {
    throw new Error(`${fnId}: its Role is not an AWS::IAM::Role of the template (${JSON.stringify(roleRef)})`)
  }
  const role = resources[roleId].Properties || {}
  const statements = []
  const refused = []
  const add = (source, list) => {
    for (const s of [].concat(list)) statements.push({ source, statement: s })
  }
  for (const p of evaluate(role.Policies || [])) add(`${roleId}.Policies ${p.PolicyName}`, p.PolicyDocument.Statement)
  for (const managedArn of evaluate(role.ManagedPolicyArns || [])) {
    const name = String(managedArn).split('/').pop()
    const known = managedPolicies[name]
    if (!known || !known.allowed) {
      refused.push({ role: roleId, policy: managedArn, why: known ? 'off the allowlist (scripts/iam/managed-policies.json)' : 'unknown to scripts/iam/managed-policies.json' })
    }
    if (known) add(`${roleId} managed ${name}`, known.statements)
  }
  for (const [id, r] of Object.entries(resources)) {
    if (r.Type !== 'AWS::IAM::Policy') continue
    if (r.Condition && !condition(r.Condition)) continue
    const roles = evaluate(r.Properties.Roles || [])
    if (roles.includes(roleId)) add(id, evaluate(r.Properties.PolicyDocument).Statement)
  }
  return { roleId, statements, refused }
}

// The functions, by the binary each builds: the dev runner's access key is docpipe-<binary>.
const functions = {}
const refusedManaged = []
for (const [id, r] of Object.entries(resources)) {
  if (r.Type !== 'AWS::Lambda::Function') continue
  if (r.Condition && !condition(r.Condition)) continue
  const binary = r.Metadata?.BuildProperties?.Binary
  if (!binary) throw new Error(`${id} has no Metadata.BuildProperties.Binary (translate with passthrough_metadata)`)
  const { roleId, statements, refused } = roleStatements(id)
  refusedManaged.push(...refused.map((x) => ({ function: id, ...x })))
  const bus = r.Properties.Environment?.Variables?.DOCPIPE_EVENT_BUS
  functions[`docpipe-${binary}`] = { id, binary, role: roleId, statements, eventBus: bus === undefined ? '' : String(evaluate(bus)) }
}

// ───────────────────────────── the recording, as IAM actions ─────────────────────────────

function credentialOf (req) {
  const auth = req.headers.Authorization || req.headers.authorization || ''
  let m = auth.match(/Credential=([^/,\s]+)\/[^/]+\/[^/]+\/([^/]+)\//)
  if (m) return { key: m[1], service: m[2] }
  const query = new URL(req.url).searchParams
  const cred = query.get('X-Amz-Credential')
  if (cred) {
    const [key, , , service] = cred.split('/')
    return { key, service, presigned: true }
  }
  if (query.get('AWSAccessKeyId')) return { key: query.get('AWSAccessKeyId'), service: 's3', presigned: true }
  m = auth.match(/^AWS ([^:]+):/)
  if (m) return { key: m[1], service: 's3' }
  return null
}

function bodyOf (req) {
  if (!req.body) return ''
  return req.body_encoded ? Buffer.from(req.body, 'base64').toString('utf8') : req.body
}

function decodeKey (raw) {
  return decodeURIComponent(raw.replace(/\+/g, '%2B'))
}

const S3_PRESIGN_PARAMS = /^(X-Amz-.*|x-id|AWSAccessKeyId|Signature|Expires|response-.*)$/i

/// [{ action, resource, context, objectRead }] for one request; throws with the reason when the
/// request cannot be mapped.
function actionsOf (req, cred) {
  const url = new URL(req.url)
  if (cred.service === 's3') {
    const [, bucket, ...rest] = url.pathname.split('/')
    const key = rest.length ? decodeKey(rest.join('/')) : null
    const params = [...url.searchParams.keys()].filter((k) => !S3_PRESIGN_PARAMS.test(k))
    const bucketArn = `arn:aws:s3:::${bucket}`
    if (key === null || key === '') {
      if (req.method === 'GET' && params.every((p) => ['list-type', 'prefix', 'encoding-type', 'continuation-token', 'delimiter', 'max-keys', 'start-after', 'fetch-owner'].includes(p))) {
        const context = {}
        if (url.searchParams.has('prefix')) context['s3:prefix'] = url.searchParams.get('prefix')
        if (url.searchParams.has('delimiter')) context['s3:delimiter'] = url.searchParams.get('delimiter')
        return [{ action: 's3:ListBucket', resource: bucketArn, context, label: `ListObjects${url.searchParams.get('list-type') === '2' ? 'V2' : ''}` }]
      }
      if (req.method === 'HEAD' && params.length === 0) return [{ action: 's3:ListBucket', resource: bucketArn, context: {}, label: 'HeadBucket' }]
      if (req.method === 'POST' && params.length === 1 && params[0] === 'delete') {
        const keys = [...bodyOf(req).matchAll(/<Key>([\s\S]*?)<\/Key>/g)].map((m) => unescapeXml(m[1]))
        if (!keys.length) throw new Error('DeleteObjects with no <Key> in its body')
        return keys.map((k) => ({ action: 's3:DeleteObject', resource: `${bucketArn}/${k}`, context: {}, label: 'DeleteObjects' }))
      }
      if (req.method === 'PUT' && params.length === 0) return [{ action: 's3:CreateBucket', resource: bucketArn, context: {}, label: 'CreateBucket' }]
      throw new Error(`S3 ${req.method} on the bucket with ${params.join('&') || 'no sub-resource'}`)
    }
    const objectArn = `${bucketArn}/${key}`
    const multipart = params.length && params.every((p) => ['uploadId', 'partNumber', 'uploads'].includes(p))
    if (params.length && !multipart) throw new Error(`S3 ${req.method} of an object with ?${params.join('&')}`)
    switch (req.method) {
      case 'GET':
      case 'HEAD':
        if (multipart) break
        return [{ action: 's3:GetObject', resource: objectArn, context: {}, objectRead: { bucket, key }, label: req.method === 'GET' ? 'GetObject' : 'HeadObject' }]
      case 'PUT':
        if (req.headers['x-amz-copy-source'] || req.headers['X-Amz-Copy-Source']) throw new Error('S3 CopyObject is not modelled by this check')
        return [{ action: 's3:PutObject', resource: objectArn, context: {}, label: multipart ? 'UploadPart' : 'PutObject' }]
      case 'POST':
        if (multipart) return [{ action: 's3:PutObject', resource: objectArn, context: {}, label: 'MultipartUpload' }]
        break
      case 'DELETE':
        if (params.includes('uploadId')) return [{ action: 's3:AbortMultipartUpload', resource: objectArn, context: {}, label: 'AbortMultipartUpload' }]
        return [{ action: 's3:DeleteObject', resource: objectArn, context: {}, label: 'DeleteObject' }]
    }
    throw new Error(`S3 ${req.method} of an object`)
  }
  if (cred.service === 'bedrock') return bedrockActions(req, url)
  const target = req.headers['X-Amz-Target'] || req.headers['x-amz-target'] || ''
  const body = bodyOf(req)
  let op = ''
  let input = {}
  if (target) {
    op = target.split('.').pop()
    try { input = body ? JSON.parse(body) : {} } catch { throw new Error(`${target} with a body that is not JSON`) }
  } else {
    // The query protocol (older SDKs): Action=… in the form body or the query string.
    const form = new URLSearchParams(body)
    op = form.get('Action') || url.searchParams.get('Action') || ''
    input = Object.fromEntries([...form, ...url.searchParams])
  }
  if (!op) throw new Error(`a ${cred.service} request with neither X-Amz-Target nor Action`)
  if (cred.service === 'sqs') {
    const action = `sqs:${op.replace(/Batch$/, '')}`
    let resource
    if (input.QueueUrl) {
      const [, account, name] = new URL(input.QueueUrl).pathname.split('/')
      resource = `arn:aws:sqs:${values.region}:${account}:${name}`
    } else if (input.QueueName) {
      resource = `arn:aws:sqs:${values.region}:${values.account_id}:${input.QueueName}`
    } else if (op === 'ListQueues') {
      resource = '*'
    } else throw new Error(`SQS ${op} names no queue`)
    return [{ action, resource, context: {}, label: op }]
  }
  if (cred.service === 'secretsmanager') {
    const id = input.SecretId || input.Name
    if (!id) throw new Error(`Secrets Manager ${op} names no secret`)
    const resource = id.startsWith('arn:') ? id : `arn:aws:secretsmanager:${values.region}:${values.account_id}:secret:${id}`
    return [{ action: `secretsmanager:${op}`, resource, context: {}, label: op }]
  }
  if (cred.service === 'events') {
    if (op !== 'PutEvents') throw new Error(`EventBridge ${op} is not modelled by this check`)
    const entries = input.Entries || []
    if (!entries.length) throw new Error('EventBridge PutEvents with no Entries')
    return entries.map((e) => {
      const context = {}
      if (e.Source !== undefined) context['events:source'] = e.Source
      if (e.DetailType !== undefined) context['events:detail-type'] = e.DetailType
      return { action: 'events:PutEvents', resource: arn.bus(e.EventBusName || 'default'), context, label: 'PutEvents', event: e.DetailType }
    })
  }
  throw new Error(`service ${cred.service} (${op}) is not modelled by this check`)
}

/// Bedrock Runtime's REST paths: InvokeModel (and its stream, Converse) on a foundation model.
function bedrockActions (req, url) {
  const m = url.pathname.match(/^\/model\/([^/]+)\/(invoke|invoke-with-response-stream|converse|converse-stream)$/)
  if (!m || req.method !== 'POST') throw new Error(`Bedrock ${req.method} ${url.pathname} is not modelled by this check`)
  const modelId = decodeURIComponent(m[1])
  const action = { invoke: 'InvokeModel', 'invoke-with-response-stream': 'InvokeModelWithResponseStream', converse: 'InvokeModel', 'converse-stream': 'InvokeModelWithResponseStream' }[m[2]]
  const resource = modelId.startsWith('arn:') ? modelId : `arn:aws:bedrock:${values.region}::foundation-model/${modelId}`
  return [{ action: `bedrock:${action}`, resource, context: {}, label: action }]
}

function unescapeXml (s) {
  return s.replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&quot;/g, '"').replace(/&apos;/g, "'").replace(/&amp;/g, '&')
}

// ───────────────────────────── the simulation ─────────────────────────────

const simCache = new Map()
async function allowed (statements, action, resource, context) {
  const cacheKey = JSON.stringify([statements, action, resource, context])
  if (simCache.has(cacheKey)) return simCache.get(cacheKey)
  const result = await runSimulation({
    identityPolicies: [{ name: 'role', policy: { Version: '2012-10-17', Statement: statements } }],
    serviceControlPolicies: [],
    resourceControlPolicies: [],
    request: {
      action,
      principal: `arn:aws:iam::${values.account_id}:role/docpipe-function`,
      resource: { accountId: resource.split(':')[4] || values.account_id, resource },
      contextVariables: context
    }
  }, {})
  if (result.resultType === 'error') {
    throw new Error(`the simulator refused ${action} on ${resource} ${JSON.stringify(context)}: ${JSON.stringify(result.errors)}`)
  }
  const ok = result.overallResult === 'Allowed'
  simCache.set(cacheKey, ok)
  return ok
}

const lines = args.recording.split(',').filter((f) => fs.existsSync(f))
  .flatMap((f) => fs.readFileSync(f, 'utf8').split('\n').filter(Boolean))
const perFunction = {}
const others = {}
const unknown = []
const findings = new Map()
const published = {} // detail-type -> entries recorded (every function's PutEvents)
for (const f of Object.values(functions)) perFunction[f.id] = { binary: f.binary, calls: 0, actions: {}, denied: 0 }

/// Findings grouped by function, kind, call and the key's first segment (`uploads/…`), with a count,
/// the number of distinct resources and one example.
function patternOf (resource, context) {
  const m = resource.match(/^(arn:aws:s3:::[^/]+)\/([^/]*\/)?/)
  if (m) return `${m[1]}/${m[2] || ''}…`
  const prefix = context['s3:prefix']
  return prefix === undefined ? resource : `${resource} (s3:prefix ${prefix.split('/')[0]}/…)`
}
function finding (fn, kind, call, why) {
  const k = JSON.stringify([fn, kind, call.label, patternOf(call.resource, call.context)])
  const f = findings.get(k) || {
    function: fn, kind, action: call.action, label: call.label,
    pattern: patternOf(call.resource, call.context), why, example: { resource: call.resource, context: call.context },
    count: 0, resources: new Set()
  }
  f.count += 1
  f.resources.add(JSON.stringify([call.resource, call.context]))
  findings.set(k, f)
}

for (const [n, line] of lines.entries()) {
  const req = JSON.parse(line)
  if (new URL(req.url).pathname.startsWith('/moto-api/')) continue
  const cred = credentialOf(req)
  const fn = cred && functions[cred.key]
  if (!fn) {
    const who = cred ? cred.key : 'unsigned'
    let label = `${req.method} ${new URL(req.url).pathname}`
    if (cred) {
      try { label = actionsOf(req, cred).map((c) => c.label).join('+') } catch { label = `${cred.service} ${req.method}` }
    }
    others[who] = others[who] || {}
    others[who][label] = (others[who][label] || 0) + 1
    continue
  }
  let calls
  try {
    calls = actionsOf(req, cred)
  } catch (e) {
    unknown.push({ function: fn.id, line: n + 1, method: req.method, url: req.url, reason: e.message })
    continue
  }
  const stats = perFunction[fn.id]
  stats.calls += 1
  const statements = fn.statements.map((s) => s.statement)
  for (const call of calls) {
    stats.actions[call.label] = (stats.actions[call.label] || 0) + 1
    if (call.event !== undefined) published[call.event] = (published[call.event] || 0) + 1
    if (!(await allowed(statements, call.action, call.resource, call.context))) {
      stats.denied += 1
      finding(fn.id, 'denied', call, `${call.action} is not allowed by the role`)
    }
    if (call.objectRead) {
      const listing = { 's3:prefix': call.objectRead.key }
      if (!(await allowed(statements, 's3:ListBucket', `arn:aws:s3:::${call.objectRead.bucket}`, listing))) {
        stats.denied += 1
        finding(fn.id, '403-not-404', call,
          'a missing key answers 403 here, not 404: the role has no s3:ListBucket on the bucket whose s3:prefix matches the key')
      }
    }
  }
}

// ───────────────────────────── EventBridge, probed ─────────────────────────────
// The recording shows the calls made; these show what each role grants beyond them on the bus.

const stackBus = values.event_bus || Object.values(functions).map((f) => f.eventBus).find(Boolean) || ''
const probes = [] // { function, what, want, got }
async function probe (fn, statements, what, action, resource, context, want) {
  const got = (await allowed(statements, action, resource, context)) ? 'allowed' : 'denied'
  probes.push({ function: fn.id, what, want, got, action, resource })
}
const OTHER_EVENTS_ACTIONS = [
  // [action, resource]: rules and targets on the bus, the bus itself, and account-wide calls
  ['events:PutRule', (b) => `arn:aws:events:${values.region}:${values.account_id}:rule/${b}/docpipe-probe`],
  ['events:PutTargets', (b) => `arn:aws:events:${values.region}:${values.account_id}:rule/${b}/docpipe-probe`],
  ['events:DeleteRule', (b) => `arn:aws:events:${values.region}:${values.account_id}:rule/${b}/docpipe-probe`],
  ['events:DescribeEventBus', (b) => arn.bus(b)],
  ['events:DeleteEventBus', (b) => arn.bus(b)],
  ['events:CreateEventBus', (b) => arn.bus(b)],
  ['events:PutPermission', () => '*'],
  ['events:ListRules', () => '*']
]
if (stackBus) {
  for (const fn of Object.values(functions)) {
    const statements = fn.statements.map((s) => s.statement)
    const event = { 'events:source': 'docpipe', 'events:detail-type': 'DocumentIndexed' }
    if (!fn.eventBus) {
      await probe(fn, statements, `PutEvents on ${stackBus} (no DOCPIPE_EVENT_BUS)`, 'events:PutEvents', arn.bus(stackBus), event, 'denied')
      continue
    }
    if (values.event_bus && fn.eventBus !== values.event_bus) {
      probes.push({ function: fn.id, what: `DOCPIPE_EVENT_BUS is ${fn.eventBus} as the template resolves it, the drill's bus is ${values.event_bus}`, want: 'the same bus', got: 'another' })
    }
    await probe(fn, statements, `PutEvents on its bus ${fn.eventBus}`, 'events:PutEvents', arn.bus(fn.eventBus), event, 'allowed')
    await probe(fn, statements, 'PutEvents on the default bus', 'events:PutEvents', arn.bus('default'), event, 'denied')
    await probe(fn, statements, `PutEvents on another bus (${fn.eventBus}-other)`, 'events:PutEvents', arn.bus(`${fn.eventBus}-other`), event, 'denied')
    await probe(fn, statements, 'PutEvents on a bus of that name in another account', 'events:PutEvents', arn.bus(fn.eventBus, '210987654321'), event, 'denied')
    for (const [action, resource] of OTHER_EVENTS_ACTIONS) {
      await probe(fn, statements, `${action.split(':')[1]} on ${resource(fn.eventBus)}`, action, resource(fn.eventBus), {}, 'denied')
    }
  }
} else {
  probes.push({ function: '(template)', what: 'no function has DOCPIPE_EVENT_BUS and the values file names no event_bus', want: 'a bus', got: 'none' })
}

// ───────────────────────────── Tenants, probed ─────────────────────────────
// AuthMode=iam: the callers' and reviewers' policies let only a principal tagged with its tenant
// (docpipe-organ-id) invoke the API, and the API function may read principals' tags in its own
// account and change none.
const TENANT_TAG = 'aws:PrincipalTag/docpipe-organ-id'
const route = `arn:aws:execute-api:${values.region}:${values.account_id}:HttpApi/$default/GET/documents`
for (const id of ['CallerPolicy', 'ReviewerPolicy']) {
  const r = resources[id]
  if (!r || (r.Condition && !condition(r.Condition))) {
    probes.push({ function: id, what: 'the policy exists (AuthMode=iam)', want: 'present', got: 'missing' })
    continue
  }
  const statements = [].concat(evaluate(r.Properties.PolicyDocument).Statement)
  const policy = { id }
  await probe(policy, statements, 'Invoke by a principal tagged with its tenant', 'execute-api:Invoke', route, { [TENANT_TAG]: 'acme' }, 'allowed')
  await probe(policy, statements, 'Invoke by a principal without a tenant tag', 'execute-api:Invoke', route, {}, 'denied')
}
const api = functions['docpipe-api']
if (api) {
  const statements = api.statements.map((s) => s.statement)
  const role = (name, account = values.account_id) => `arn:aws:iam::${account}:role/${name}`
  await probe(api, statements, 'ListRoleTags of a caller\'s role', 'iam:ListRoleTags', role('docpipe-operator'), {}, 'allowed')
  await probe(api, statements, 'ListUserTags of a caller', 'iam:ListUserTags', `arn:aws:iam::${values.account_id}:user/alice`, {}, 'allowed')
  await probe(api, statements, 'ListRoleTags of a role in another account', 'iam:ListRoleTags', role('docpipe-operator', '210987654321'), {}, 'denied')
  for (const action of ['iam:TagRole', 'iam:UntagRole', 'iam:GetRole', 'iam:PassRole', 'iam:DeleteRole']) {
    await probe(api, statements, `${action.split(':')[1]} of a caller's role`, action, role('docpipe-operator'), {}, 'denied')
  }
  for (const action of ['iam:TagUser', 'iam:CreateAccessKey']) {
    await probe(api, statements, `${action.split(':')[1]} of a caller`, action, `arn:aws:iam::${values.account_id}:user/alice`, {}, 'denied')
  }
} else {
  probes.push({ function: '(template)', what: 'the API function (binary api)', want: 'present', got: 'missing' })
}
const probeFailures = probes.filter((p) => p.want !== p.got)

// Statements (and their actions) that no recorded call needed: what the drill did not exercise,
// or what the role could do without.
const unused = []
for (const fn of Object.values(functions)) {
  const fnCalls = []
  for (const line of lines) {
    const req = JSON.parse(line)
    if (new URL(req.url).pathname.startsWith('/moto-api/')) continue
    const cred = credentialOf(req)
    if (!cred || cred.key !== `docpipe-${fn.binary}`) continue
    try {
      for (const c of actionsOf(req, cred)) {
        fnCalls.push(c)
        if (c.objectRead) fnCalls.push({ action: 's3:ListBucket', resource: `arn:aws:s3:::${c.objectRead.bucket}`, context: { 's3:prefix': c.objectRead.key } })
      }
    } catch { /* reported above */ }
  }
  const distinct = [...new Map(fnCalls.map((c) => [JSON.stringify([c.action, c.resource, c.context]), c])).values()]
  for (const { source, statement } of fn.statements) {
    // The allowlisted managed policies hold what Lambda itself uses (logs, ENIs, traces).
    if (statement.Effect !== 'Allow' || source.includes(' managed ')) continue
    for (const action of [].concat(statement.Action)) {
      const single = { ...statement, Action: action }
      let used = false
      for (const c of distinct) {
        if (await allowed([single], c.action, c.resource, c.context)) { used = true; break }
      }
      if (!used) unused.push({ function: fn.id, source, action, resource: statement.Resource })
    }
  }
}

// ───────────────────────────── the report ─────────────────────────────

const silent = Object.entries(perFunction).filter(([, s]) => s.calls === 0).map(([id]) => id)
const list = [...findings.values()].map((f) => ({ ...f, resources: f.resources.size }))
console.log('[iam-check] calls recorded per function (each checked against its role in template.yaml, as SAM translates it):')
for (const [id, s] of Object.entries(perFunction)) {
  const actions = Object.entries(s.actions).map(([a, c]) => `${a} ${c}`).join(', ')
  console.log(`  ${id.padEnd(20)} ${String(s.calls).padStart(4)} calls  ${s.denied ? `${s.denied} DENIED` : 'all allowed'}  (${actions || 'none'})`)
}
const byFn = {}
for (const p of probes) (byFn[p.function] = byFn[p.function] || []).push(p)
console.log(`[iam-check] probes (EventBridge for each role, the tenant tag for the callers' policies and the API; each as IAM evaluates it; the stack's bus is ${stackBus || 'unknown'}):`)
for (const [id, list] of Object.entries(byFn)) {
  const bad = list.filter((p) => p.want !== p.got)
  const allowedOnes = list.filter((p) => p.got === 'allowed').map((p) => p.what)
  console.log(`  ${id.padEnd(20)} ${bad.length ? `${bad.length} WRONG` : 'as expected'}: ${list.length} probes; allowed: ${allowedOnes.join(', ') || 'none'}`)
}
for (const p of probeFailures) console.log(`  PROBE ${p.function}: ${p.what}: ${p.got}, must be ${p.want}`)
const publishedLine = Object.entries(published).map(([t, n]) => `${t} ${n}`).join(', ')
console.log(publishedLine
  ? `  events published in the drill (PutEvents entries, each checked above against its function's role): ${publishedLine}`
  : '  no function published an event in the drill: events:PutEvents is covered by the probes only')
const otherLine = Object.entries(others).map(([who, ops]) => `${who}: ${Object.values(ops).reduce((a, b) => a + b, 0)}`).join(', ')
if (otherLine) console.log(`  not a function's calls (the drill's client, the runner's queue set-up), not checked: ${otherLine}`)
for (const f of list) {
  const ctx = Object.keys(f.example.context).length ? ` ${JSON.stringify(f.example.context)}` : ''
  console.log(`  ${f.kind === 'denied' ? 'DENIED' : '403   '} ${f.function}: ${f.label} ${f.pattern}: ${f.why}; ${f.count} call(s) on ${f.resources} resource(s), e.g. ${f.example.resource}${ctx}`)
}
for (const u of unknown) console.log(`  UNKNOWN ${u.function}: ${u.method} ${u.url} (recording line ${u.line}): ${u.reason}`)
for (const id of silent) console.log(`  SILENT ${id}: no call recorded (was its key docpipe-${perFunction[id].binary} applied, did the drill run it?)`)
for (const m of refusedManaged) console.log(`  MANAGED ${m.function}: its role ${m.role} carries ${m.policy}, ${m.why}`)
if (unused.length) {
  console.log('[iam-check] granted, but no recorded call needed it (not an error; the allowlisted managed policies, which Lambda itself uses, are left out):')
  for (const u of unused) console.log(`  ${u.function}: ${u.action} on ${JSON.stringify(u.resource)} (${u.source})`)
}
if (args.report) {
  fs.writeFileSync(args.report, JSON.stringify({ perFunction, findings: list, unknown, silent, refusedManaged, others, unused, probes, published, roles: Object.fromEntries(Object.values(functions).map((f) => [f.id, { role: f.role, statements: f.statements }])) }, null, 2))
}
const failed = list.length + unknown.length + silent.length + refusedManaged.length + probeFailures.length
if (failed) {
  console.log(`[iam-check] FAILED: ${list.length} denied or 403 finding(s), ${unknown.length} unmapped request(s), ${silent.length} silent function(s), ${refusedManaged.length} managed polic(ies) off the allowlist, ${probeFailures.length} probe(s) wrong`)
  process.exit(1)
}
console.log(`[iam-check] every call of every function is allowed by its role, every GET/HEAD of a key that may be missing answers 404, events:PutEvents is allowed on the stack's bus only, and only a principal tagged with its tenant may invoke the API`)
