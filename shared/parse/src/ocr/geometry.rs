//! Plane geometry for text boxes: convex hulls and minimum-area rotated rectangles (what OpenCV's
//! `minAreaRect` gives rapidocr), so that a skewed scan's lines are cropped along their slope.

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub x: f32,
    pub y: f32,
}

impl Point {
    pub fn new(x: f32, y: f32) -> Self {
        Point { x, y }
    }
}

fn cross(o: Point, a: Point, b: Point) -> f32 {
    (a.x - o.x) * (b.y - o.y) - (a.y - o.y) * (b.x - o.x)
}

/// Andrew's monotone chain; the hull is counter-clockwise in a y-up frame, without repeats.
pub(crate) fn convex_hull(mut pts: Vec<Point>) -> Vec<Point> {
    pts.sort_by(|a, b| a.x.total_cmp(&b.x).then(a.y.total_cmp(&b.y)));
    pts.dedup();
    if pts.len() < 3 {
        return pts;
    }
    let mut hull: Vec<Point> = Vec::with_capacity(pts.len() * 2);
    for pass in 0..2 {
        let start = hull.len();
        let iter: Box<dyn Iterator<Item = &Point>> = if pass == 0 {
            Box::new(pts.iter())
        } else {
            Box::new(pts.iter().rev())
        };
        for &p in iter {
            while hull.len() >= start + 2
                && cross(hull[hull.len() - 2], hull[hull.len() - 1], p) <= 0.0
            {
                hull.pop();
            }
            hull.push(p);
        }
        hull.pop();
    }
    hull
}

/// A rectangle of `width` along `angle` (radians from the x axis) and `height` across it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct RotatedRect {
    pub center: Point,
    pub width: f32,
    pub height: f32,
    pub angle: f32,
}

impl RotatedRect {
    pub fn area(&self) -> f32 {
        self.width * self.height
    }

    pub(crate) fn perimeter(&self) -> f32 {
        2.0 * (self.width + self.height)
    }

    pub(crate) fn short_side(&self) -> f32 {
        self.width.min(self.height)
    }

    /// The rectangle grown by `d` on every side. Offsetting a rectangle with round joins (what
    /// pyclipper does in DB's unclip) and taking the minimum-area rectangle again gives this.
    pub(crate) fn grown(&self, d: f32) -> RotatedRect {
        RotatedRect {
            width: self.width + 2.0 * d,
            height: self.height + 2.0 * d,
            ..*self
        }
    }

    fn axes(&self) -> (Point, Point) {
        let (s, c) = self.angle.sin_cos();
        (Point::new(c, s), Point::new(-s, c))
    }

    /// Corners in order: the start of the width axis on the low side of the height axis, then
    /// around.
    pub(crate) fn corners(&self) -> [Point; 4] {
        let (u, v) = self.axes();
        let (hw, hh) = (self.width / 2.0, self.height / 2.0);
        let at = |a: f32, b: f32| {
            Point::new(
                self.center.x + u.x * a + v.x * b,
                self.center.y + u.y * a + v.y * b,
            )
        };
        [at(-hw, -hh), at(hw, -hh), at(hw, hh), at(-hw, hh)]
    }

    /// Whether `p` lies inside, with `slack` pixels of tolerance.
    pub fn contains(&self, p: Point, slack: f32) -> bool {
        let (u, v) = self.axes();
        let (dx, dy) = (p.x - self.center.x, p.y - self.center.y);
        let a = dx * u.x + dy * u.y;
        let b = dx * v.x + dy * v.y;
        a.abs() <= self.width / 2.0 + slack && b.abs() <= self.height / 2.0 + slack
    }

    /// The same rectangle described with its width along the more horizontal axis, so that a
    /// line of text reads along `width` from its left end.
    pub(crate) fn reading_frame(&self) -> RotatedRect {
        let mut r = *self;
        let mut angle = r.angle.rem_euclid(std::f32::consts::PI);
        if angle > std::f32::consts::FRAC_PI_2 {
            angle -= std::f32::consts::PI;
        }
        r.angle = angle;
        if angle.abs() > std::f32::consts::FRAC_PI_4 {
            // Nearer vertical: turn the frame a quarter so width runs left to right.
            r.angle = if angle > 0.0 {
                angle - std::f32::consts::FRAC_PI_2
            } else {
                angle + std::f32::consts::FRAC_PI_2
            };
            std::mem::swap(&mut r.width, &mut r.height);
        }
        r
    }
}

/// Rotating calipers over the hull's edges: the smallest rectangle has a side on one of them.
/// Points are pixel centres, so a blob of n pixels across measures n, not n − 1.
pub(crate) fn min_area_rect(hull: &[Point]) -> Option<RotatedRect> {
    if hull.is_empty() {
        return None;
    }
    if hull.len() < 3 {
        let (a, b) = (hull[0], *hull.last().unwrap_or(&hull[0]));
        let (dx, dy) = (b.x - a.x, b.y - a.y);
        return Some(RotatedRect {
            center: Point::new((a.x + b.x) / 2.0, (a.y + b.y) / 2.0),
            width: (dx * dx + dy * dy).sqrt() + 1.0,
            height: 1.0,
            angle: dy.atan2(dx),
        });
    }
    let mut best: Option<(f32, RotatedRect)> = None;
    for i in 0..hull.len() {
        let (a, b) = (hull[i], hull[(i + 1) % hull.len()]);
        let len = ((b.x - a.x).powi(2) + (b.y - a.y).powi(2)).sqrt();
        if len == 0.0 {
            continue;
        }
        let u = Point::new((b.x - a.x) / len, (b.y - a.y) / len);
        let v = Point::new(-u.y, u.x);
        let (mut umin, mut umax, mut vmin, mut vmax) = (f32::MAX, f32::MIN, f32::MAX, f32::MIN);
        for p in hull {
            let pu = p.x * u.x + p.y * u.y;
            let pv = p.x * v.x + p.y * v.y;
            umin = umin.min(pu);
            umax = umax.max(pu);
            vmin = vmin.min(pv);
            vmax = vmax.max(pv);
        }
        let (w, h) = (umax - umin, vmax - vmin);
        let area = w * h;
        if best.as_ref().is_none_or(|(a, _)| area < *a) {
            let (cu, cv) = ((umin + umax) / 2.0, (vmin + vmax) / 2.0);
            best = Some((
                area,
                RotatedRect {
                    center: Point::new(cu * u.x + cv * v.x, cu * u.y + cv * v.y),
                    width: w + 1.0,
                    height: h + 1.0,
                    angle: u.y.atan2(u.x),
                },
            ));
        }
    }
    best.map(|(_, r)| r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_axis_aligned_block_gives_its_own_rectangle() {
        let mut pts = Vec::new();
        for y in 0..5 {
            pts.push(Point::new(0.0, y as f32));
            pts.push(Point::new(19.0, y as f32));
        }
        let r = min_area_rect(&convex_hull(pts)).unwrap().reading_frame();
        assert!(
            (r.width - 20.0).abs() < 0.01 && (r.height - 5.0).abs() < 0.01,
            "{r:?}"
        );
        assert!(r.angle.abs() < 1e-4);
        assert!((r.center.x - 9.5).abs() < 0.01 && (r.center.y - 2.0).abs() < 0.01);
    }

    #[test]
    fn a_skewed_line_keeps_its_slope() {
        let slope = 1.2f32.to_radians();
        let mut pts = Vec::new();
        for i in 0..400 {
            for j in 0..30 {
                let (x, y) = (i as f32, j as f32);
                pts.push(Point::new(
                    x * slope.cos() - y * slope.sin(),
                    x * slope.sin() + y * slope.cos(),
                ));
            }
        }
        let r = min_area_rect(&convex_hull(pts)).unwrap().reading_frame();
        assert!((r.angle - slope).abs() < 0.002, "{}", r.angle.to_degrees());
        assert!(
            (r.width - 400.0).abs() < 2.0 && (r.height - 30.0).abs() < 2.0,
            "{r:?}"
        );
    }

    #[test]
    fn containment_follows_the_rotation() {
        let r = RotatedRect {
            center: Point::new(0.0, 0.0),
            width: 10.0,
            height: 2.0,
            angle: std::f32::consts::FRAC_PI_2,
        };
        assert!(r.contains(Point::new(0.0, 4.5), 0.0));
        assert!(!r.contains(Point::new(4.5, 0.0), 0.0));
    }
}
