//! Allocation traces of training loops, generated: what a tensor library asks of the
//! allocator step after step.
//!
//! [`TrainingModel::trace`] writes the allocations of a few dozen training steps of one
//! model as a framework would make them:
//!
//! - parameters (f32) allocated once; Adam's two moments per parameter at the first
//!   optimizer step, persistent after;
//! - each step's batch shape drawn anew (sequence length, batch size or image size, as the
//!   model's data would vary), so activations come back at similar but not identical sizes;
//! - forward: per layer, the activations saved for backward (bf16) and temporaries freed
//!   at once; the loss's logits;
//! - backward, last layer first: gradient temporaries, each parameter's gradient, and the
//!   layer's saved activations freed;
//! - the optimizer: a temporary per parameter; gradients freed at the end of the step
//!   (`zero_grad(set_to_none=True)`, PyTorch's default);
//! - every `eval_every` steps an evaluation step: forward only, at another batch shape,
//!   each activation freed once the next layer has read it.
//!
//! Traces are deterministic (a seeded `fastrand` generator): the same model gives the same
//! events on every machine, so cubert and PyTorch replay the same file
//! ([`AllocationTrace::to_text`], `cubert bench --only trace --write-traces DIR`).

use super::trace::{AllocationTrace, TraceEvent};
use std::collections::HashMap;

const MIB: u64 = 1 << 20;
/// Bytes of an f32 (parameters, optimizer state, gradients).
const F32: u64 = 4;
/// Bytes of a bf16 (activations).
const BF16: u64 = 2;

/// A model whose training loop [`TrainingModel::trace`] writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrainingModel {
    /// A decoder-only transformer (12 layers, width 2048, vocabulary 32,000): batch 4,
    /// sequence length drawn from 512 ..= 2048 each step; evaluation at batch 8, length 1024.
    Transformer,
    /// An MLP of 8 layers of width 8192: batch size drawn from 256 ..= 4096 each step (the
    /// last batches of epochs, curriculum schedules); evaluation at batch 8192.
    Mlp,
    /// A convolutional network (4 stages of 3 convolutions, 64 to 512 channels): batch 64,
    /// square images whose side is drawn from 192 ..= 320 each step (multi-scale training);
    /// evaluation at batch 128, side 256.
    ConvNet,
}

impl TrainingModel {
    /// Every model, in the order the bench replays them.
    pub const ALL: [TrainingModel; 3] = [Self::Transformer, Self::Mlp, Self::ConvNet];

    /// A short name for file and figure names (`transformer`, `mlp`, `convnet`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Transformer => "transformer",
            Self::Mlp => "mlp",
            Self::ConvNet => "convnet",
        }
    }

    /// The trace of this model's training loop: 60 steps (150 for the MLP, whose steps
    /// are short), an evaluation step every 10.
    pub fn trace(self) -> AllocationTrace {
        let mut trainer = Trainer::new(0x5eed_0000 + self as u64);
        match self {
            Self::Transformer => trainer.run(&transformer(), 60, 10),
            Self::Mlp => trainer.run(&mlp(), 150, 10),
            Self::ConvNet => trainer.run(&convnet(), 60, 10),
        }
        trainer.finish()
    }
}

/// What one layer allocates for a batch: sizes in bytes.
struct LayerShape {
    /// Activations saved for backward.
    saved: Vec<u64>,
    /// Temporaries of the forward pass (freed at once).
    temporaries: Vec<u64>,
}

/// The layers' allocations for a batch shape drawn with the generator (evaluation shape if
/// the flag is set), and the logits' size.
type BatchLayers = dyn Fn(&mut fastrand::Rng, bool) -> (Vec<LayerShape>, u64);

/// A model as the trace sees it: parameter sizes per layer, and the layers' activations
/// for a batch shape.
struct ModelShape {
    /// Bytes of each parameter tensor, per layer.
    params: Vec<Vec<u64>>,
    /// The layers' allocations for a training batch drawn with the generator.
    layers: Box<BatchLayers>,
}

fn transformer() -> ModelShape {
    const LAYERS: usize = 12;
    const HIDDEN: u64 = 2048;
    const VOCAB: u64 = 32_000;
    let mut params = vec![vec![VOCAB * HIDDEN * F32]];
    for _ in 0..LAYERS {
        params.push(vec![
            3 * HIDDEN * HIDDEN * F32,
            HIDDEN * HIDDEN * F32,
            4 * HIDDEN * HIDDEN * F32,
            4 * HIDDEN * HIDDEN * F32,
            2 * HIDDEN * F32,
        ]);
    }
    ModelShape {
        params,
        layers: Box::new(|rng, eval| {
            let (batch, seq) = if eval {
                (8, 1024)
            } else {
                (4, rng.u64(512..=2048))
            };
            let tokens = batch * seq;
            let act = tokens * HIDDEN * BF16;
            let layers = (0..LAYERS)
                .map(|_| LayerShape {
                    // norm out, qkv, attention out, mlp up, mlp activation
                    saved: vec![act, 3 * act, act, 4 * act, 4 * act],
                    // attention's softmax statistics, the residual sum
                    temporaries: vec![batch * 16 * seq * F32, act],
                })
                .collect();
            (layers, tokens * VOCAB * BF16)
        }),
    }
}

fn mlp() -> ModelShape {
    const LAYERS: usize = 8;
    const WIDTH: u64 = 8192;
    let params = (0..LAYERS)
        .map(|_| vec![WIDTH * WIDTH * F32, WIDTH * F32])
        .collect();
    ModelShape {
        params,
        layers: Box::new(|rng, eval| {
            let batch = if eval { 8192 } else { rng.u64(256..=4096) };
            let act = batch * WIDTH * BF16;
            let layers = (0..LAYERS)
                .map(|_| LayerShape {
                    saved: vec![act, act],
                    temporaries: vec![act],
                })
                .collect();
            (layers, batch * 1000 * BF16)
        }),
    }
}

fn convnet() -> ModelShape {
    const CHANNELS: [u64; 4] = [64, 128, 256, 512];
    let mut params = Vec::new();
    for (stage, &channels) in CHANNELS.iter().enumerate() {
        let input = if stage == 0 { 3 } else { CHANNELS[stage - 1] };
        for conv in 0..3 {
            let inputs = if conv == 0 { input } else { channels };
            params.push(vec![channels * inputs * 9 * F32, 2 * channels * F32]);
        }
    }
    params.push(vec![512 * 1000 * F32, 1000 * F32]);
    ModelShape {
        params,
        layers: Box::new(|rng, eval| {
            let (batch, side) = if eval {
                (128, 256)
            } else {
                (64, rng.u64(6..=10) * 32)
            };
            let mut layers = Vec::new();
            for (stage, &channels) in CHANNELS.iter().enumerate() {
                let spatial = (side >> (stage + 1)).pow(2);
                let act = batch * channels * spatial * BF16;
                for _ in 0..3 {
                    layers.push(LayerShape {
                        // convolution out, normalization out, activation out
                        saved: vec![act, act, act],
                        temporaries: vec![batch * channels * F32 * 2],
                    });
                }
            }
            layers.push(LayerShape {
                saved: vec![batch * 512 * BF16],
                temporaries: Vec::new(),
            });
            (layers, batch * 1000 * F32)
        }),
    }
}

/// The size of the first layer's first saved activation: the model's input.
fn first_saved(layers: &[LayerShape]) -> u64 {
    layers
        .first()
        .and_then(|layer| layer.saved.first())
        .copied()
        .unwrap_or(MIB)
}

/// Writes the events of a training loop.
struct Trainer {
    rng: fastrand::Rng,
    events: Vec<TraceEvent>,
    live: HashMap<u64, u64>,
    live_bytes: u64,
    peak_live_bytes: u64,
    next_id: u64,
}

impl Trainer {
    fn new(seed: u64) -> Self {
        Self {
            rng: fastrand::Rng::with_seed(seed),
            events: Vec::new(),
            live: HashMap::new(),
            live_bytes: 0,
            peak_live_bytes: 0,
            next_id: 0,
        }
    }

    fn alloc(&mut self, size: u64) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let size = size.max(1);
        self.events.push(TraceEvent::Alloc { id, size });
        self.live.insert(id, size);
        self.live_bytes += size;
        self.peak_live_bytes = self.peak_live_bytes.max(self.live_bytes);
        id
    }

    fn free(&mut self, id: u64) {
        if let Some(size) = self.live.remove(&id) {
            self.live_bytes -= size;
            self.events.push(TraceEvent::Free { id });
        }
    }

    /// Bytes of live allocation `id` (0 if it isn't live).
    fn size(&self, id: u64) -> u64 {
        self.live.get(&id).copied().unwrap_or(0)
    }

    /// A temporary: allocated and freed at once.
    fn temporary(&mut self, size: u64) {
        let id = self.alloc(size);
        self.free(id);
    }

    fn run(&mut self, model: &ModelShape, steps: u32, eval_every: u32) {
        let params: Vec<Vec<u64>> = model
            .params
            .iter()
            .map(|layer| layer.iter().map(|&size| self.alloc(size)).collect())
            .collect();
        let mut moments: Vec<u64> = Vec::new();
        for step in 1..=steps {
            self.train_step(model, &params, &mut moments);
            if step % eval_every == 0 {
                self.eval_step(model);
            }
        }
        let everything: Vec<u64> = params.into_iter().flatten().chain(moments).collect();
        for id in everything {
            self.free(id);
        }
    }

    fn train_step(&mut self, model: &ModelShape, params: &[Vec<u64>], moments: &mut Vec<u64>) {
        let (layers, logits) = (model.layers)(&mut self.rng, false);
        let input = self.alloc(first_saved(&layers));
        let mut saved: Vec<Vec<u64>> = Vec::with_capacity(layers.len());
        for layer in &layers {
            let ids = layer.saved.iter().map(|&size| self.alloc(size)).collect();
            for &size in &layer.temporaries {
                self.temporary(size);
            }
            saved.push(ids);
        }
        let logits = self.alloc(logits);
        // The loss: f32 log-probabilities of the logits, freed once reduced.
        let loss = self.alloc(self.size(logits) * 2);
        self.free(loss);
        // Backward, last layer first. Layer i's parameters are those of `params[i]`, the
        // model's extra parameter groups (embedding, head) going with the first layers.
        let mut grads: Vec<u64> = Vec::new();
        let grad_logits = self.alloc(self.size(logits));
        self.free(logits);
        let mut grad_out = grad_logits;
        for (index, (ids, layer)) in saved.into_iter().zip(&layers).enumerate().rev() {
            let grad_in = self.alloc(ids.first().map_or(MIB, |&id| self.size(id)));
            for &size in &layer.temporaries {
                self.temporary(size);
            }
            if let Some(layer_params) = params.get(index) {
                for &param in layer_params {
                    grads.push(self.alloc(self.size(param)));
                }
            }
            for id in ids {
                self.free(id);
            }
            self.free(grad_out);
            grad_out = grad_in;
        }
        self.free(grad_out);
        self.free(input);
        // Parameters the layers didn't cover (a head after the last layer).
        for layer_params in params.iter().skip(layers.len()) {
            for &param in layer_params {
                grads.push(self.alloc(self.size(param)));
            }
        }
        // Adam: moments at the first step, a temporary per parameter.
        let flat: Vec<u64> = params.iter().flatten().copied().collect();
        if moments.is_empty() {
            for &param in &flat {
                let size = self.size(param);
                moments.push(self.alloc(size));
                moments.push(self.alloc(size));
            }
        }
        for &param in &flat {
            self.temporary(self.size(param));
        }
        for grad in grads {
            self.free(grad);
        }
    }

    fn eval_step(&mut self, model: &ModelShape) {
        let (layers, logits) = (model.layers)(&mut self.rng, true);
        let mut previous = self.alloc(first_saved(&layers));
        for layer in &layers {
            for &size in &layer.temporaries {
                self.temporary(size);
            }
            let out = self.alloc(layer.saved.last().copied().unwrap_or(MIB));
            self.free(previous);
            previous = out;
        }
        let logits = self.alloc(logits);
        self.free(previous);
        self.free(logits);
    }

    fn finish(self) -> AllocationTrace {
        AllocationTrace {
            events: self.events,
            peak_live_bytes: self.peak_live_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traces_are_deterministic_balanced_and_parse_back() {
        for model in TrainingModel::ALL {
            let trace = model.trace();
            assert_eq!(trace, model.trace(), "{}", model.name());
            let allocs = trace
                .events
                .iter()
                .filter(|event| matches!(event, TraceEvent::Alloc { .. }))
                .count();
            assert_eq!(
                allocs * 2,
                trace.events.len(),
                "{}: every alloc is freed",
                model.name()
            );
            let parsed = AllocationTrace::parse(&trace.to_text()).unwrap();
            assert_eq!(parsed, trace, "{}", model.name());
        }
    }

    #[test]
    fn training_traces_are_the_size_the_bench_expects() {
        let gib = |bytes: u64| bytes as f64 / (1u64 << 30) as f64;
        for model in TrainingModel::ALL {
            let trace = model.trace();
            let peak = gib(trace.peak_live_bytes);
            assert!(
                (2.0..24.0).contains(&peak),
                "{}: peak live {peak:.2} GiB",
                model.name()
            );
            assert!(
                (15_000..100_000).contains(&trace.events.len()),
                "{}: {} events",
                model.name(),
                trace.events.len()
            );
        }
    }
}
