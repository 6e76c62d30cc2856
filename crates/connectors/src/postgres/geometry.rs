//! Postgres' native geometric types as Debezium carries them: points as
//! `io.debezium.data.geometry.Point` (coordinates plus WKB), and box, lseg, path and polygon
//! as `io.debezium.data.geometry.Geometry` (little-endian OGC WKB plus an `extensions` map).

use sluice_api::{Schema, Value};

use super::mapping::{names, parse_float, GeometryKind};

/// The entries of a Geometry's `extensions` map.
type Extensions = Vec<(Value, Value)>;

/// The WKB and the `extensions` map of a box, lseg, path or polygon's text form.
pub(super) fn wkb(kind: GeometryKind, text: &str) -> Option<(Vec<u8>, Extensions)> {
    let text = text.trim();
    let points = parse_points(text)?;
    let mut extensions = vec![(Value::String("type".into()), Value::String(kind.name().into()))];
    let wkb = match kind {
        GeometryKind::Box if points.len() == 2 => {
            let ((x1, y1), (x2, y2)) = (points[0], points[1]);
            wkb_polygon(&[(x1, y1), (x1, y2), (x2, y2), (x2, y1), (x1, y1)])
        }
        GeometryKind::Lseg if points.len() == 2 => wkb_line_string(&points),
        GeometryKind::Path if !points.is_empty() => {
            // `[…]` is an open path, `(…)` a closed one.
            let closed = text.starts_with('(');
            extensions.push((Value::String("closed".into()), Value::String(closed.to_string())));
            wkb_line_string(&points)
        }
        GeometryKind::Polygon if !points.is_empty() => {
            let mut ring = points;
            if ring.first() != ring.last() {
                ring.push(ring[0]);
            }
            wkb_polygon(&ring)
        }
        _ => return None,
    };
    Some((wkb, extensions))
}

/// Debezium's `io.debezium.data.geometry.Point` schema (required; the caller makes it optional).
pub(super) fn point_schema() -> Schema {
    Schema::struct_of([
        ("x", Schema::float64().into_ref()),
        ("y", Schema::float64().into_ref()),
        ("wkb", Schema::bytes().optional().into_ref()),
        ("srid", Schema::int32().optional().into_ref()),
    ])
    .named(names::POINT)
    .with_version(1)
    .with_doc("Geometry (POINT)")
}

/// A point as Debezium builds it: the coordinates and their WKB, no SRID.
pub(super) fn point_value(x: f64, y: f64) -> Value {
    let mut wkb = Vec::with_capacity(21);
    wkb.push(1u8); // little endian
    wkb.extend_from_slice(&1u32.to_le_bytes()); // Point
    wkb.extend_from_slice(&x.to_le_bytes());
    wkb.extend_from_slice(&y.to_le_bytes());
    Value::Struct(sluice_api::Struct::from_values(
        point_schema().into_ref(),
        vec![Value::Float64(x), Value::Float64(y), Value::Bytes(wkb), Value::Null],
    ))
}

/// `(x,y)`.
pub(super) fn parse_point(text: &str) -> Option<(f64, f64)> {
    let inner = text.strip_prefix('(')?.strip_suffix(')')?;
    let (x, y) = inner.split_once(',')?;
    Some((parse_float(x.trim())?, parse_float(y.trim())?))
}

/// Every `(x,y)` in a box, lseg, path or polygon's text form, in order: the innermost
/// parentheses each hold one point.
fn parse_points(text: &str) -> Option<Vec<(f64, f64)>> {
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(found) = text[i..].find('(') {
        let start = i + found;
        if text[start + 1..].starts_with('(') {
            i = start + 1;
            continue;
        }
        let end = start + text[start..].find(')')?;
        out.push(parse_point(&text[start..=end])?);
        i = end + 1;
    }
    Some(out)
}

fn wkb_points(out: &mut Vec<u8>, points: &[(f64, f64)]) {
    out.extend_from_slice(&(points.len() as u32).to_le_bytes());
    for (x, y) in points {
        out.extend_from_slice(&x.to_le_bytes());
        out.extend_from_slice(&y.to_le_bytes());
    }
}

/// OGC WKB LineString, little endian (Debezium's `WkbWriter`).
fn wkb_line_string(points: &[(f64, f64)]) -> Vec<u8> {
    let mut out = vec![1u8];
    out.extend_from_slice(&2u32.to_le_bytes());
    wkb_points(&mut out, points);
    out
}

/// OGC WKB Polygon of one ring, little endian.
fn wkb_polygon(ring: &[(f64, f64)]) -> Vec<u8> {
    let mut out = vec![1u8];
    out.extend_from_slice(&3u32.to_le_bytes());
    out.extend_from_slice(&1u32.to_le_bytes());
    wkb_points(&mut out, ring);
    out
}
