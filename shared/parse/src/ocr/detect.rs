//! Text detection post-processing (DB, "Differentiable Binarization", as PaddleOCR and
//! rapidocr do it): the detector's probability map becomes rotated text boxes. Pure logic.

use super::geometry::{convex_hull, min_area_rect, Point, RotatedRect};

/// The knobs of DB post-processing, with rapidocr's defaults.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DbParams {
    /// A pixel is text when its probability exceeds this.
    pub thresh: f32,
    /// A box is kept when the mean probability inside it exceeds this.
    pub box_thresh: f32,
    /// How far a box grows past the shrunk kernel the model predicts (area × ratio / perimeter).
    pub unclip_ratio: f32,
    pub max_candidates: usize,
}

impl Default for DbParams {
    fn default() -> Self {
        DbParams {
            thresh: 0.3,
            box_thresh: 0.5,
            unclip_ratio: 1.6,
            max_candidates: 1000,
        }
    }
}

/// Boxes from a `width × height` probability map (row-major), in its pixels.
pub fn boxes(prob: &[f32], width: usize, height: usize, p: &DbParams) -> Vec<RotatedRect> {
    let mask = dilate(&threshold(prob, p.thresh), width, height);
    let mut out = Vec::new();
    for component in components(&mask, width, height)
        .into_iter()
        .take(p.max_candidates)
    {
        let hull = convex_hull(component);
        let Some(rect) = min_area_rect(&hull) else {
            continue;
        };
        if rect.short_side() < 3.0 {
            continue;
        }
        let score = mean_inside(prob, width, height, &rect);
        if score < p.box_thresh {
            continue;
        }
        let grown = rect.grown(rect.area() * p.unclip_ratio / rect.perimeter());
        if grown.short_side() < 5.0 {
            continue;
        }
        out.push(grown);
    }
    out
}

fn threshold(prob: &[f32], t: f32) -> Vec<bool> {
    prob.iter().map(|&v| v > t).collect()
}

/// 2×2 dilation as OpenCV anchors it (at the kernel's centre): each pixel takes the maximum of
/// itself and its upper, left and upper-left neighbours.
fn dilate(mask: &[bool], width: usize, height: usize) -> Vec<bool> {
    let mut out = vec![false; mask.len()];
    for y in 0..height {
        for x in 0..width {
            let at = |dx: usize, dy: usize| x >= dx && y >= dy && mask[(y - dy) * width + (x - dx)];
            out[y * width + x] = at(0, 0) || at(1, 0) || at(0, 1) || at(1, 1);
        }
    }
    out
}

/// The 8-connected components of the mask, each as the end points of its row runs: the convex
/// hull of those is the hull of the component, at a fraction of its pixels.
fn components(mask: &[bool], width: usize, height: usize) -> Vec<Vec<Point>> {
    struct Run {
        y: usize,
        x0: usize,
        x1: usize,
    }
    let mut runs: Vec<Run> = Vec::new();
    let mut row_start = vec![0usize; height + 1];
    for y in 0..height {
        row_start[y] = runs.len();
        let row = &mask[y * width..(y + 1) * width];
        let mut x = 0;
        while x < width {
            if row[x] {
                let x0 = x;
                while x < width && row[x] {
                    x += 1;
                }
                runs.push(Run { y, x0, x1: x - 1 });
            } else {
                x += 1;
            }
        }
    }
    row_start[height] = runs.len();
    let mut parent: Vec<usize> = (0..runs.len()).collect();
    fn find(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    for y in 1..height {
        let (prev, cur) = (
            row_start[y - 1]..row_start[y],
            row_start[y]..row_start[y + 1],
        );
        let mut j = prev.start;
        for i in cur {
            // Runs touch (8-connected) when their x ranges overlap after widening by one.
            while j < prev.end && runs[j].x1 + 1 < runs[i].x0 {
                j += 1;
            }
            let mut k = j;
            while k < prev.end && runs[k].x0 <= runs[i].x1 + 1 {
                let (a, b) = (find(&mut parent, i), find(&mut parent, k));
                if a != b {
                    parent[a.max(b)] = a.min(b);
                }
                k += 1;
            }
        }
    }
    let mut index_of_root = std::collections::HashMap::new();
    let mut out: Vec<Vec<Point>> = Vec::new();
    for (i, r) in runs.iter().enumerate() {
        let root = find(&mut parent, i);
        let slot = *index_of_root.entry(root).or_insert_with(|| {
            out.push(Vec::new());
            out.len() - 1
        });
        out[slot].push(Point::new(r.x0 as f32, r.y as f32));
        out[slot].push(Point::new(r.x1 as f32, r.y as f32));
    }
    out
}

/// Mean probability over the map's pixels inside the rectangle ("fast" box score).
fn mean_inside(prob: &[f32], width: usize, height: usize, rect: &RotatedRect) -> f32 {
    let corners = rect.corners();
    let (mut x0, mut y0, mut x1, mut y1) = (f32::MAX, f32::MAX, f32::MIN, f32::MIN);
    for c in &corners {
        x0 = x0.min(c.x);
        y0 = y0.min(c.y);
        x1 = x1.max(c.x);
        y1 = y1.max(c.y);
    }
    let clamp = |v: f32, hi: usize| (v.max(0.0) as usize).min(hi.saturating_sub(1));
    let (x0, x1) = (clamp(x0.floor(), width), clamp(x1.ceil(), width));
    let (y0, y1) = (clamp(y0.floor(), height), clamp(y1.ceil(), height));
    let (mut sum, mut n) = (0f64, 0usize);
    for y in y0..=y1 {
        for x in x0..=x1 {
            if rect.contains(Point::new(x as f32, y as f32), 0.0) {
                sum += prob[y * width + x] as f64;
                n += 1;
            }
        }
    }
    if n == 0 {
        0.0
    } else {
        (sum / n as f64) as f32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_one_box_per_blob_and_grows_it() {
        let (w, h) = (60, 32);
        let mut prob = vec![0f32; w * h];
        // Two text kernels: 20×6 at (5,5) and 12×6 at (40,20).
        for y in 5..11 {
            for x in 5..25 {
                prob[y * w + x] = 0.9;
            }
        }
        for y in 20..26 {
            for x in 40..52 {
                prob[y * w + x] = 0.9;
            }
        }
        let found = boxes(&prob, w, h, &DbParams::default());
        assert_eq!(found.len(), 2, "{found:?}");
        let big = found
            .iter()
            .max_by(|a, b| a.area().total_cmp(&b.area()))
            .unwrap();
        // Unclipped: wider than the 20 × 6 kernel on both sides.
        assert!(big.width.max(big.height) > 22.0 && big.short_side() > 7.0);
    }

    #[test]
    fn weak_blobs_are_dropped() {
        let (w, h) = (20, 20);
        let mut prob = vec![0f32; w * h];
        for y in 5..12 {
            for x in 5..15 {
                prob[y * w + x] = 0.35;
            }
        }
        assert!(boxes(&prob, w, h, &DbParams::default()).is_empty());
    }
}
