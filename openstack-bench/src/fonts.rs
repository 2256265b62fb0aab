//! The one font every plot draws with, embedded in the binary: DejaVu Sans
//! (`openstack-bench/fonts/`, Bitstream Vera license beside it), registered with plotters as
//! `sans-serif`. plotters is built with `ab_glyph` instead of `ttf`, so it never asks the
//! system for a font: plots draw the same text on a machine with no fonts installed, and
//! nothing links fontconfig or freetype.

use plotters::style::{register_font, FontStyle};
use std::sync::OnceLock;

/// The family name every chart asks for.
pub const FAMILY: &str = "sans-serif";

const DEJAVU_SANS: &[u8] = include_bytes!("../fonts/DejaVuSans.ttf");

/// Registers the embedded font (once per process); call before drawing any text.
pub fn register() -> anyhow::Result<()> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok =
        *REGISTERED.get_or_init(|| register_font(FAMILY, FontStyle::Normal, DEJAVU_SANS).is_ok());
    anyhow::ensure!(
        ok,
        "the embedded font fonts/DejaVuSans.ttf is not a valid TrueType font"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use plotters::style::{FontDesc, FontFamily};

    #[test]
    fn the_embedded_font_registers_and_measures_text() {
        register().unwrap();
        register().unwrap();
        let font = FontDesc::new(FontFamily::SansSerif, 22.0, FontStyle::Normal);
        let (width, _) = font.box_size("decline ratio").unwrap();
        assert!(width > 100, "`decline ratio` at 22 px is {width} px wide");
    }
}
