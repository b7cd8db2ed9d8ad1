//! Bakes the directory of libz3.so into the `proofgate` binary (and this package's tests) as
//! an rpath, so it runs without LD_LIBRARY_PATH (libz3 comes from the z3-solver wheel).

fn main() {
    println!("cargo:rerun-if-env-changed=Z3_LIBRARY_PATH_OVERRIDE");
    // `sqlx::migrate!` embeds these directories: a new migration must rebuild the package.
    println!("cargo:rerun-if-changed=migrations");
    println!("cargo:rerun-if-changed=migrations-sqlite");
    if let Ok(dir) = std::env::var("Z3_LIBRARY_PATH_OVERRIDE") {
        if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
            println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
        }
    }
}
