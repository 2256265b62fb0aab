//! Plots draw their text on a machine with no fonts installed: a child process draws a chart
//! with fontconfig pointed at a configuration that names no font directory, and the PNG must
//! hold the title's pixels and the SVG its text.
//!
//! The test binary is its own child (`harness = false`): run with `PLOT_CHILD_DIR` set it
//! draws into that folder and exits; run without, it is the parent that checks.

use openstack_bench::sim::plot::{write, Chart, Series};
use std::path::Path;
use std::process::{Command, ExitCode};

const CHILD_DIR: &str = "PLOT_CHILD_DIR";
const TITLE: &str = "Decline ratio without system fonts";
const LEGEND: &str = "worst_fit";

fn main() -> ExitCode {
    if let Some(dir) = std::env::var_os(CHILD_DIR) {
        return draw(Path::new(&dir));
    }
    a_plot_drawn_with_no_fonts_installed_has_its_text();
    println!("plots_without_fonts: a plot drawn with no fonts installed has its text ... ok");
    ExitCode::SUCCESS
}

/// The child: one chart, `chart.png` and `chart.svg`.
fn draw(dir: &Path) -> ExitCode {
    let series = [Series::new(
        LEGEND,
        vec![(1.0, 0.5), (10.0, 2.0), (50.0, 7.5)],
    )];
    let chart = Chart::new(TITLE, "schedulers s", "decline ratio (%)", &series);
    match write(dir, "chart", &chart) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("plot not written: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn a_plot_drawn_with_no_fonts_installed_has_its_text() {
    let tmp = tempfile::tempdir().expect("temporary directory");
    let out = tmp.path().join("out");
    std::fs::create_dir(&out).expect("output directory");
    // A complete fontconfig configuration with no <dir>, no <include> and its own cache:
    // fontconfig finds no font at all.
    let conf = tmp.path().join("fonts.conf");
    std::fs::write(
        &conf,
        format!(
            "<?xml version=\"1.0\"?>\n<!DOCTYPE fontconfig SYSTEM \"fonts.dtd\">\n\
             <fontconfig><cachedir>{}</cachedir></fontconfig>\n",
            tmp.path().join("cache").display()
        ),
    )
    .expect("fonts.conf");
    let me = std::env::current_exe().expect("this test's binary");
    let child = Command::new(me)
        .env(CHILD_DIR, &out)
        .env("FONTCONFIG_FILE", &conf)
        .env("FONTCONFIG_PATH", tmp.path())
        .env("HOME", tmp.path())
        .env_remove("XDG_DATA_HOME")
        .env_remove("XDG_DATA_DIRS")
        .output()
        .expect("running the child");
    assert!(
        child.status.success(),
        "the child failed to draw: {}",
        String::from_utf8_lossy(&child.stderr)
    );

    let svg = std::fs::read_to_string(out.join("chart.svg")).expect("chart.svg");
    let texts: Vec<&str> = svg
        .split("<text")
        .skip(1)
        .filter_map(|t| Some(t.split_once('>')?.1.split_once("</text>")?.0.trim()))
        .collect();
    for text in [TITLE, LEGEND, "schedulers s"] {
        assert!(texts.contains(&text), "the SVG lacks `{text}`: {texts:?}");
    }

    let png = image::open(out.join("chart.png"))
        .expect("chart.png")
        .to_rgb8();
    assert_eq!(png.dimensions(), (900, 560));
    // The title is the only thing drawn in the band above the plotting area (the chart's
    // margin is 12 px and the caption 22 px high); its glyphs are dark.
    let dark_in_title_band = (0..png.width())
        .flat_map(|x| (0..30).map(move |y| (x, y)))
        .filter(|&(x, y)| png.get_pixel(x, y).0.iter().all(|c| *c < 128))
        .count();
    assert!(
        dark_in_title_band > 200,
        "the title band has {dark_in_title_band} dark pixels: the title was not drawn"
    );
}
