//! Bakes the directory of libz3.so into this package's test and bench binaries as an rpath,
//! so they run without LD_LIBRARY_PATH (libz3 comes from the z3-solver wheel, not the system).

fn main() {
    println!("cargo:rerun-if-env-changed=Z3_LIBRARY_PATH_OVERRIDE");
    if let Ok(dir) = std::env::var("Z3_LIBRARY_PATH_OVERRIDE") {
        if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
            println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
        }
    }
}
