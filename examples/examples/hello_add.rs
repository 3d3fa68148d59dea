//! Hello, cubert: upload two vectors, add them on the default device, read the sum back.
//!
//! ```text
//! cargo run -p cubert-examples --example hello_add
//! ```

use cubert::{Bytes, ElemType, ops};
use std::error::Error;
use std::process::ExitCode;

fn run() -> Result<(), Box<dyn Error>> {
    // The client of the default device (CPU device 0).
    let client = cubert::default_client()?;
    println!("device: {}", client.properties().name);

    let lhs: Vec<f32> = (0..8).map(|i| i as f32 * 1.5).collect();
    let rhs: Vec<f32> = (0..8).map(|i| 100.0 - i as f32).collect();

    // Uploads are queued and return a handle at once.
    let a = client.create(Bytes::from_slice(&lhs))?;
    let b = client.create(Bytes::from_slice(&rhs))?;
    let sum = client.empty(lhs.len() * size_of::<f32>())?;

    // The launch is queued too; errors of queued work come back at the next sync or read.
    ops::add(&client, &a, &b, &sum, lhs.len(), ElemType::F32)?;

    // Reading waits for everything queued before it.
    let result = client.read_one(sum)?.to_elems::<f32>();
    println!("lhs       = {lhs:?}");
    println!("rhs       = {rhs:?}");
    println!("lhs + rhs = {result:?}");

    let expected: Vec<f32> = lhs.iter().zip(&rhs).map(|(x, y)| x + y).collect();
    if result != expected {
        return Err(format!("expected {expected:?}").into());
    }
    println!("ok");
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("hello_add: {error}");
            ExitCode::FAILURE
        }
    }
}
