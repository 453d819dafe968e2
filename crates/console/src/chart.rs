//! Daily bar charts as inline SVG (no script, scales with the page).

use std::fmt::Write as _;

/// One bar: a day (`YYYY-MM-DD`) and its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Bar {
    pub day: String,
    pub value: u64,
}

const WIDTH: u32 = 640;
const HEIGHT: u32 = 200;
const LEFT: u32 = 52;
const RIGHT: u32 = 8;
const TOP: u32 = 12;
const BOTTOM: u32 = 28;

/// Escapes text for XML content and attributes.
pub(crate) fn xml_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// `1234` -> `1.2k`, `5600000` -> `5.6M`.
pub(crate) fn compact(n: u64) -> String {
    // Float conversion only for display; exactness does not matter at these magnitudes.
    #[allow(clippy::cast_precision_loss)]
    let f = n as f64;
    if n >= 1_000_000_000 {
        format!("{:.1}G", f / 1e9)
    } else if n >= 1_000_000 {
        format!("{:.1}M", f / 1e6)
    } else if n >= 10_000 {
        format!("{:.1}k", f / 1e3)
    } else {
        n.to_string()
    }
}

/// The smallest 1, 2 or 5 times a power of ten that is at least `max` (at least 1).
fn nice_ceiling(max: u64) -> u64 {
    let mut step = 1_u64;
    loop {
        for factor in [1, 2, 5] {
            let candidate = step.saturating_mul(factor);
            if candidate >= max || candidate == u64::MAX {
                return candidate;
            }
        }
        step = step.saturating_mul(10);
    }
}

/// A bar chart of `bars` titled `title` (e.g. "Images per day"); `id` must be unique on the page;
/// `class` picks the bar colour in the stylesheet.
pub(crate) fn bar_chart(id: &str, title: &str, unit: &str, bars: &[Bar], class: &str) -> String {
    let total: u64 = bars.iter().map(|b| b.value).sum();
    let top = nice_ceiling(bars.iter().map(|b| b.value).max().unwrap_or(0));
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let count = u32::try_from(bars.len()).unwrap_or(u32::MAX).max(1);
    let slot = f64::from(plot_w) / f64::from(count);
    let bar_w = (slot * 0.72).max(1.0);
    let range = match (bars.first(), bars.last()) {
        (Some(first), Some(last)) => format!("{} to {}", first.day, last.day),
        _ => "no days".to_owned(),
    };
    let label = xml_escape(&format!("{title}, {range}: {total} {unit} in total"));
    let (id, class) = (xml_escape(id), xml_escape(class));
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg class="chart {class}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-labelledby="{id}-title" preserveAspectRatio="xMidYMid meet"><title id="{id}-title">{label}</title>"#
    );
    // Grid lines and labels at 0, half and the top.
    for (fraction, value) in [(0.0, 0), (0.5, top / 2), (1.0, top)] {
        let y = f64::from(TOP) + f64::from(plot_h) * (1.0 - fraction);
        let _ = write!(
            svg,
            r#"<line class="grid" x1="{LEFT}" x2="{}" y1="{y:.1}" y2="{y:.1}"/><text class="axis" x="{}" y="{:.1}" text-anchor="end">{}</text>"#,
            WIDTH - RIGHT,
            LEFT - 6,
            y + 4.0,
            compact(value)
        );
    }
    for (i, bar) in bars.iter().enumerate() {
        let index = u32::try_from(i).unwrap_or(u32::MAX);
        // Display arithmetic on small values.
        #[allow(clippy::cast_precision_loss)]
        let height = if top == 0 {
            0.0
        } else {
            f64::from(plot_h) * (bar.value as f64) / (top as f64)
        };
        let x = f64::from(LEFT) + slot * f64::from(index) + (slot - bar_w) / 2.0;
        let y = f64::from(TOP + plot_h) - height;
        let _ = write!(
            svg,
            r#"<rect class="bar" x="{x:.1}" y="{y:.1}" width="{bar_w:.1}" height="{height:.1}"><title>{}: {} {}</title></rect>"#,
            xml_escape(&bar.day),
            bar.value,
            xml_escape(unit)
        );
    }
    let baseline_y = HEIGHT - 8;
    if let (Some(first), Some(last)) = (bars.first(), bars.last()) {
        let _ = write!(
            svg,
            r#"<text class="axis" x="{LEFT}" y="{baseline_y}">{}</text><text class="axis" x="{}" y="{baseline_y}" text-anchor="end">{}</text>"#,
            xml_escape(&first.day),
            WIDTH - RIGHT,
            xml_escape(&last.day)
        );
    }
    if total == 0 {
        let _ = write!(
            svg,
            r#"<text class="empty" x="{}" y="{}" text-anchor="middle">No {} in this period</text>"#,
            LEFT + plot_w / 2,
            TOP + plot_h / 2,
            xml_escape(unit)
        );
    }
    svg.push_str("</svg>");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bars(values: &[u64]) -> Vec<Bar> {
        values
            .iter()
            .enumerate()
            .map(|(i, v)| Bar {
                day: format!("2025-01-{:02}", i + 1),
                value: *v,
            })
            .collect()
    }

    #[test]
    fn one_rect_per_day_scaled_to_a_nice_top() {
        let svg = bar_chart("img", "Images per day", "images", &bars(&[3, 0, 7]), "images");
        assert!(svg.starts_with("<svg class=\"chart images\""));
        assert_eq!(svg.matches("<rect ").count(), 3);
        assert!(svg.contains("<title>2025-01-03: 7 images</title>"));
        assert!(svg.contains("Images per day, 2025-01-01 to 2025-01-03: 10 images in total"));
        // Top of the axis is 10 (nice ceiling of 7), the bar of 7 is 70% of the plot height.
        assert!(svg.contains(">10</text>"));
        let plot_h = f64::from(HEIGHT - TOP - BOTTOM);
        assert!(svg.contains(&format!("height=\"{:.1}\"", plot_h * 0.7)), "{svg}");
        assert!(!svg.contains("No images in this period"));
    }

    #[test]
    fn empty_period_says_so() {
        let svg = bar_chart("t", "Tokens per day", "tokens", &bars(&[0, 0]), "tokens");
        assert!(svg.contains("No tokens in this period"));
        assert!(svg.ends_with("</svg>"));
    }

    #[test]
    fn escapes_text() {
        assert_eq!(xml_escape("<a & \"b\">"), "&lt;a &amp; &quot;b&quot;&gt;");
        let svg = bar_chart("x\"", "<t>", "u", &bars(&[1]), "c");
        assert!(!svg.contains("<t>"));
    }

    #[test]
    fn nice_numbers() {
        assert_eq!(nice_ceiling(0), 1);
        assert_eq!(nice_ceiling(3), 5);
        assert_eq!(nice_ceiling(11), 20);
        assert_eq!(nice_ceiling(1_000), 1_000);
        assert_eq!(compact(999), "999");
        assert_eq!(compact(12_345), "12.3k");
        assert_eq!(compact(5_600_000), "5.6M");
    }
}
