//! The library part of the `lafuse` command: what only the command needs, kept out of the
//! embeddable `lafuse` library so that an embedder does not build it or its dependencies
//! (clap, csv, indicatif, plotters). `bench` is `lafuse bench`, the paper's experiments run as
//! child processes of the binary; `calibrate` is `lafuse calibrate`, the measurement of the
//! machine profile (which `lafuse::profile` loads); `bound` the `--input`/`--output` files of
//! `lafuse run` and `explain`. The binary itself is `main.rs`.

pub mod bench;
pub mod bound;
pub mod calibrate;
