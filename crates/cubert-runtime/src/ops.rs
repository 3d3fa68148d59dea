//! Ready-made operations on device buffers: fill, copy, cast, add, mul, row sums and
//! matrix products.
//!
//! Each helper builds the runtime's standard kernel, packs the buffers and info as
//! [`kernel::standard`](crate::kernel::standard) documents, picks a cube count, and launches
//! on the client's stream: it returns once the work is queued, like any launch. The same
//! call runs on every backend, so code generic over [`Runtime`] gets the same results on
//! each.
//!
//! ```
//! use cubert_runtime::{Bytes, ElemType, ops};
//! # let client = cubert_cpu::default_client()?;
//!
//! let x = client.create(Bytes::from_elems(vec![1.0f32, 2.0, 3.0, 4.0]))?;
//! let y = client.empty(4 * 4)?;
//! ops::fill(&client, &y, 4, 10.0f32)?; // y = 10
//! ops::add(&client, &x, &y, &y, 4, ElemType::F32)?; // y = x + y, in place
//! let sums = client.empty(2 * 4)?;
//! ops::reduce_sum(&client, &y, &sums, 2, 2, ElemType::F32)?; // y as 2 rows of 2
//! assert_eq!(client.read_one(sums)?.to_elems::<f32>(), vec![23.0, 27.0]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Every helper checks, on the caller's thread and before anything is queued, that each
//! buffer holds the elements the lengths and shapes ask of it: a length beyond a handle is
//! an [`IoError::InvalidArgument`] naming the helper and the argument, never a launch
//! that runs over the device's memory until a bounds check stops it.
//!
//! Elementwise helpers launch one unit per element. Kernels index with `u32`, so a call
//! over more than [`ELEMENTS_PER_LAUNCH`] elements is split into launches over views of
//! that many elements.

use crate::client::ComputeClient;
use crate::elem::{ElemType, Element};
use crate::error::{IoError, LaunchError};
use crate::handle::Handle;
use crate::kernel::standard::{StandardKernel, encode_scalar};
use crate::kernel::{CubeCount, KernelArguments, KernelMetadata, MetadataBindingInfo};
use crate::properties::DeviceProperties;
use crate::runtime::Runtime;

/// Most cubes worth dispatching for `work_items` items on `properties`' device, each cube
/// taking `per_cube` items.
pub fn spread_cube_count(properties: &DeviceProperties, work_items: u64, per_cube: u32) -> u32 {
    let hardware = &properties.hardware;
    let wanted = work_items.div_ceil(u64::from(per_cube.max(1))).max(1);
    let cap = match (
        hardware.num_cpu_cores,
        hardware.num_streaming_multiprocessors,
    ) {
        (Some(cores), _) => u64::from(cores) * 4,
        (None, Some(sms)) => u64::from(sms) * 32,
        (None, None) => u64::from(hardware.max_cube_count.0),
    };
    wanted
        .min(cap)
        .min(u64::from(hardware.max_cube_count.0))
        .max(1) as u32
}

/// Cubes for an elementwise kernel over `work_items` items, `per_cube` per cube: one unit
/// per item, up to the device's grid limit (past it, the kernels' grid-stride loops cover
/// the rest).
pub fn elementwise_cube_count(
    properties: &DeviceProperties,
    work_items: u64,
    per_cube: u32,
) -> u32 {
    work_items
        .div_ceil(u64::from(per_cube.max(1)))
        .clamp(1, u64::from(properties.hardware.max_cube_count.0.max(1))) as u32
}

/// The grid of an elementwise kernel over `work_items` items, `per_cube` per cube: one unit
/// per item. Past the device's limit along x (65535 cubes on wgpu) the grid grows along y,
/// so every item still has its unit (`ABSOLUTE_POS` counts cubes row by row); the
/// kernels' grid-stride loops cover what even that leaves. A grid of few cubes looping over
/// many items each kept wgpu's vector add at a tenth of CUDA's bandwidth.
///
/// ```
/// # use cubert_runtime::{CubeCount, ops};
/// # let client = cubert_cpu::default_client()?;
/// let mut properties = client.properties().clone();
/// properties.hardware.max_cube_count = (65535, 65535, 65535);
/// // 2^28 items of 256 per cube: 2^20 cubes, 65535 by 17.
/// let grid = ops::elementwise_grid(&properties, 1 << 28, 256);
/// assert!(matches!(grid, CubeCount::Static(65535, 17, 1)));
/// assert!(matches!(ops::elementwise_grid(&properties, 1000, 256), CubeCount::Static(4, 1, 1)));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn elementwise_grid(
    properties: &DeviceProperties,
    work_items: u64,
    per_cube: u32,
) -> CubeCount {
    let wanted = work_items.div_ceil(u64::from(per_cube.max(1))).max(1);
    let (max_x, max_y, _) = properties.hardware.max_cube_count;
    let max_x = u64::from(max_x.max(1));
    if wanted <= max_x {
        return CubeCount::new_1d(wanted as u32);
    }
    let rows = wanted.div_ceil(max_x).min(u64::from(max_y.max(1)));
    CubeCount::Static(max_x as u32, rows as u32, 1)
}

/// Cubes for a reduce-sum kernel over `rows` rows, `rows_per_cube` per cube. On a CPU, one
/// cube per `rows_per_cube` rows: the unit-per-row kernel takes the exclusive fast path only
/// on a grid of a unit per row (the executor runs cubes in runs anyway). On a GPU, as many
/// cubes as [`spread_cube_count`] gives (32 per multiprocessor at most), each striding
/// over its share of rows: a block per few short rows would spend more on starting blocks
/// than on summing.
pub fn reduce_cube_count(properties: &DeviceProperties, rows: u64, rows_per_cube: u32) -> u32 {
    if properties.hardware.num_cpu_cores.is_some() {
        elementwise_cube_count(properties, rows, rows_per_cube)
    } else {
        spread_cube_count(properties, rows, rows_per_cube)
    }
}

/// Most elements one launch of an elementwise kernel covers: kernels index with `u32`, so
/// the helpers split longer calls into launches over views of this many elements.
pub const ELEMENTS_PER_LAUNCH: usize = 1 << 31;

fn word(len: usize) -> u64 {
    len as u64
}

/// Checks that `handle`, the argument `name` of the helper `op`, holds `count` elements of
/// `elem` (`None`: a shape whose element count overflows).
///
/// # Errors
/// [`IoError::InvalidArgument`] naming `op`, `name`, the handle's size and the count.
pub fn check_holds(
    op: &str,
    name: &str,
    handle: &Handle,
    count: Option<usize>,
    elem: ElemType,
) -> Result<(), LaunchError> {
    let needed = count.and_then(|count| (count as u64).checked_mul(elem.size() as u64));
    match (count, needed) {
        (Some(_), Some(needed)) if needed <= handle.size() => Ok(()),
        (Some(count), _) => Err(IoError::invalid(format!(
            "ops::{op}: `{name}` holds {} bytes ({} elements of {elem}) but the call asks for \
             {count} elements",
            handle.size(),
            handle.size() / elem.size().max(1) as u64
        ))
        .into()),
        (None, _) => Err(IoError::invalid(format!(
            "ops::{op}: the element count of `{name}` overflows (the shape is too large)"
        ))
        .into()),
    }
}

fn launch_standard<R: Runtime>(
    client: &ComputeClient<R>,
    kernel: StandardKernel,
    buffers: &[&Handle],
    info: Vec<u64>,
    count: impl FnOnce(&DeviceProperties, &crate::kernel::CubeDim) -> CubeCount,
) -> Result<(), LaunchError> {
    let kernel = R::standard_kernel(kernel)?;
    let count = count(client.properties(), &kernel.cube_dim());
    let arguments = KernelArguments::new()
        .with_buffers(buffers.iter().map(|h| h.to_binding()).collect())
        .with_info(MetadataBindingInfo::custom(info));
    client.launch(kernel, count, arguments)
}

/// Launches the elementwise `kernel` over `len` elements of `buffers` (each with its
/// element type), with info `[len, extra...]`: one launch, or one per
/// [`ELEMENTS_PER_LAUNCH`] elements over views of the buffers. On GPUs, add and mul of
/// 4-byte types over 16-byte aligned views go by lines of 4 elements (one unit's element
/// is too little work in flight to stream device memory at full speed; CPUs vectorize the
/// scalar kernel themselves), with the scalar kernel for a ragged tail. Zero elements
/// launch nothing.
fn launch_elementwise<R: Runtime>(
    client: &ComputeClient<R>,
    kernel: StandardKernel,
    buffers: &[(&Handle, ElemType)],
    len: usize,
    extra: &[u64],
) -> Result<(), LaunchError> {
    let scalar = R::standard_kernel(kernel)?;
    if len == 0 {
        return Ok(());
    }
    let (lines, units) = if client.properties().hardware.num_cpu_cores.is_none() {
        (
            crate::kernel::standard::lines_kernel::<R>(kernel)?,
            crate::kernel::standard::units_kernel::<R>(kernel)?,
        )
    } else {
        (None, None)
    };
    let per_element = PerElement {
        looping: scalar,
        units,
    };
    let line = crate::kernel::standard::elementwise::LINE;
    let mut start = 0;
    loop {
        let count = (len - start).min(ELEMENTS_PER_LAUNCH);
        let views = buffers
            .iter()
            .map(|(handle, elem)| {
                let size = elem.size() as u64;
                handle.view(start as u64 * size, count as u64 * size)
            })
            .collect::<Result<Vec<_>, IoError>>()?;
        let aligned = views.iter().all(|view| view.offset() % 16 == 0);
        match &lines {
            Some(lines) if aligned && count >= line => {
                let body = count - count % line;
                launch_over(client, lines.clone(), &views, body / line, extra)?;
                if body < count {
                    let tail = views
                        .iter()
                        .zip(buffers)
                        .map(|(view, (_, elem))| {
                            let size = elem.size() as u64;
                            view.view(body as u64 * size, (count - body) as u64 * size)
                        })
                        .collect::<Result<Vec<_>, IoError>>()?;
                    per_element.launch(client, &tail, count - body, extra)?;
                }
            }
            _ => per_element.launch(client, &views, count, extra)?,
        }
        start += count;
        if start >= len {
            return Ok(());
        }
    }
}

/// The element-by-element form of an elementwise kernel (not by lines): the grid-stride
/// kernel, and on GPUs the one of a unit per element without a loop, which a
/// one-dimensional grid takes (a grid of several rows, past the device's x limit, needs the
/// loop).
struct PerElement<K> {
    looping: K,
    units: Option<K>,
}

impl<K: Clone> PerElement<K> {
    /// One launch over `views`, as [`launch_over`].
    fn launch<R: Runtime>(
        &self,
        client: &ComputeClient<R>,
        views: &[Handle],
        count: usize,
        extra: &[u64],
    ) -> Result<(), LaunchError>
    where
        R::Server: crate::server::ComputeServer<Kernel = K>,
        K: KernelMetadata,
    {
        match &self.units {
            Some(units)
                if matches!(
                    elementwise_grid(
                        client.properties(),
                        count as u64,
                        units.cube_dim().num_elems()
                    ),
                    CubeCount::Static(_, 1, 1)
                ) =>
            {
                launch_over(client, units.clone(), views, count, extra)
            }
            _ => launch_over(client, self.looping.clone(), views, count, extra),
        }
    }
}

/// One launch of an elementwise kernel over `views`, with info `[count, extra...]` and one
/// unit per item.
///
/// Launched without device-side bounds checks (unless `[compilation] bounds_check` asks for
/// them): every caller has checked on the host that each buffer holds the elements the
/// launch visits, so the checks could never fire, and on a GPU they are most of the time
/// of a small launch (a one-element add in a graph).
fn launch_over<R: Runtime>(
    client: &ComputeClient<R>,
    kernel: <R::Server as crate::server::ComputeServer>::Kernel,
    views: &[Handle],
    count: usize,
    extra: &[u64],
) -> Result<(), LaunchError> {
    let per_cube = kernel.cube_dim().num_elems();
    let cubes = elementwise_grid(client.properties(), count as u64, per_cube);
    let mut info = vec![word(count)];
    info.extend_from_slice(extra);
    let arguments = KernelArguments::new()
        .with_buffers(views.iter().map(Handle::to_binding).collect())
        .with_info(MetadataBindingInfo::custom(info));
    // SAFETY: the elementwise kernels access item `i` of each buffer only for `i < count`
    // (the grid-stride loops end at `count`, clamped lower by the buffers' lengths; the
    // kernels of a unit per element test `i < count`; an item of the lines kernel is a line
    // of 4), each of `views` holds `count` items of its buffer's type (made by
    // `launch_elementwise` from handles `check_holds` found large enough), and every loop
    // ends.
    unsafe { client.launch_unchecked(kernel, cubes, arguments) }
}

/// Launches the empty kernel once.
///
/// # Errors
/// As [`ComputeClient::launch`].
pub fn noop<R: Runtime>(client: &ComputeClient<R>) -> Result<(), LaunchError> {
    launch_standard(client, StandardKernel::Noop, &[], Vec::new(), |_, _| {
        CubeCount::new_single()
    })
}

/// `out[i] = value` for `i < len`.
///
/// ```
/// # use cubert_runtime::ops;
/// # let client = cubert_cpu::default_client()?;
/// let out = client.empty(5 * 4)?;
/// ops::fill(&client, &out, 5, -1i32)?;
/// assert_eq!(client.read_one(out.clone())?.to_elems::<i32>(), vec![-1; 5]);
/// // Checked before anything is queued: 6 i32 don't fit in 20 bytes.
/// assert!(ops::fill(&client, &out, 6, 0i32).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// [`IoError::InvalidArgument`] (in [`LaunchError::IoError`]) if `out` holds fewer than
/// `len` elements; as [`ComputeClient::launch`].
pub fn fill<R: Runtime, T: Element>(
    client: &ComputeClient<R>,
    out: &Handle,
    len: usize,
    value: T,
) -> Result<(), LaunchError> {
    check_holds("fill", "out", out, Some(len), T::ELEM)?;
    launch_elementwise(
        client,
        StandardKernel::Fill(T::ELEM),
        &[(out, T::ELEM)],
        len,
        &[encode_scalar(value)],
    )
}

/// `dst[i] = src[i]` for `i < len` elements of `elem`: a memory copy of the first
/// `len` elements ([`ComputeClient::copy`]), or the standard copy kernel where the two
/// ranges overlap without being the same.
///
/// # Errors
/// As [`ComputeClient::launch`].
pub fn copy<R: Runtime>(
    client: &ComputeClient<R>,
    src: &Handle,
    dst: &Handle,
    len: usize,
    elem: ElemType,
) -> Result<(), LaunchError> {
    check_holds("copy", "src", src, Some(len), elem)?;
    check_holds("copy", "dst", dst, Some(len), elem)?;
    let bytes = len as u64 * elem.size() as u64;
    let (from, to) = (src.view(0, bytes)?, dst.view(0, bytes)?);
    if bytes > 0 && !crate::client::overlap_partly(&from, &to) {
        return Ok(client.copy(&from, &to)?);
    }
    launch_elementwise(
        client,
        StandardKernel::Copy(elem),
        &[(src, elem), (dst, elem)],
        len,
        &[],
    )
}

/// `dst[i] = src[i] as to` for `i < len`, for every pair of element types, with the
/// language's conversions (`docs/kernel-language.md`): floats to integers saturate and NaN
/// gives 0; into a half type or an 8-bit float ([`ElemType::E4M3`], [`ElemType::E5M2`])
/// rounds once to nearest even, the 8-bit floats saturating to their largest finite value
/// (infinities too) and giving `0x7f` for NaN; out of them is exact.
///
/// ```
/// # use cubert_runtime::{Bytes, ElemType, ops};
/// # let client = cubert_cpu::default_client()?;
/// let src = client.create(Bytes::from_elems(vec![1.0f32, 2.0, 300.0]))?;
/// let dst = client.empty(3 * 4)?;
/// ops::cast(&client, &src, &dst, 3, ElemType::F32, ElemType::I32)?;
/// assert_eq!(client.read_one(dst)?.to_elems::<i32>(), vec![1, 2, 300]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// As [`ComputeClient::launch`]; [`LaunchError`] if `src` or `dst` is too small for `len`
/// elements of its type (nothing is written).
pub fn cast<R: Runtime>(
    client: &ComputeClient<R>,
    src: &Handle,
    dst: &Handle,
    len: usize,
    from: ElemType,
    to: ElemType,
) -> Result<(), LaunchError> {
    check_holds("cast", "src", src, Some(len), from)?;
    check_holds("cast", "dst", dst, Some(len), to)?;
    launch_elementwise(
        client,
        StandardKernel::Cast { from, to },
        &[(src, from), (dst, to)],
        len,
        &[],
    )
}

/// `out[i] = lhs[i] + rhs[i]` for `i < len`.
///
/// ```
/// # use cubert_runtime::{Bytes, ElemType, ops};
/// # let client = cubert_cpu::default_client()?;
/// let lhs = client.create(Bytes::from_elems(vec![1u32, 2, 3]))?;
/// let rhs = client.create(Bytes::from_elems(vec![10u32, 20, 30]))?;
/// let out = client.empty(3 * 4)?;
/// ops::add(&client, &lhs, &rhs, &out, 3, ElemType::U32)?;
/// assert_eq!(client.read_one(out)?.to_elems::<u32>(), vec![11, 22, 33]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// As [`ComputeClient::launch`]; [`LaunchError`] for `bool` and the 8-bit floats, which
/// have no arithmetic (the message says to cast first; nothing is written).
pub fn add<R: Runtime>(
    client: &ComputeClient<R>,
    lhs: &Handle,
    rhs: &Handle,
    out: &Handle,
    len: usize,
    elem: ElemType,
) -> Result<(), LaunchError> {
    check_holds("add", "lhs", lhs, Some(len), elem)?;
    check_holds("add", "rhs", rhs, Some(len), elem)?;
    check_holds("add", "out", out, Some(len), elem)?;
    launch_elementwise(
        client,
        StandardKernel::Add(elem),
        &[(lhs, elem), (rhs, elem), (out, elem)],
        len,
        &[],
    )
}

/// `out[i] = lhs[i] * rhs[i]` for `i < len`.
///
/// # Errors
/// As [`ComputeClient::launch`]; [`LaunchError`] for `bool` and the 8-bit floats, which
/// have no arithmetic (the message says to cast first; nothing is written).
pub fn mul<R: Runtime>(
    client: &ComputeClient<R>,
    lhs: &Handle,
    rhs: &Handle,
    out: &Handle,
    len: usize,
    elem: ElemType,
) -> Result<(), LaunchError> {
    check_holds("mul", "lhs", lhs, Some(len), elem)?;
    check_holds("mul", "rhs", rhs, Some(len), elem)?;
    check_holds("mul", "out", out, Some(len), elem)?;
    launch_elementwise(
        client,
        StandardKernel::Mul(elem),
        &[(lhs, elem), (rhs, elem), (out, elem)],
        len,
        &[],
    )
}

/// `out[r] = sum of row r` of a row-major `rows × cols` matrix.
///
/// ```
/// # use cubert_runtime::{Bytes, ElemType, ops};
/// # let client = cubert_cpu::default_client()?;
/// let matrix = client.create(Bytes::from_elems(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]))?;
/// let sums = client.empty(2 * 4)?;
/// ops::reduce_sum(&client, &matrix, &sums, 2, 3, ElemType::F32)?; // 2 rows of 3
/// assert_eq!(client.read_one(sums)?.to_elems::<f32>(), vec![6.0, 15.0]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// As [`ComputeClient::launch`]; [`LaunchError`] for `bool` and the 8-bit floats, which
/// have no arithmetic.
pub fn reduce_sum<R: Runtime>(
    client: &ComputeClient<R>,
    input: &Handle,
    out: &Handle,
    rows: usize,
    cols: usize,
    elem: ElemType,
) -> Result<(), LaunchError> {
    check_reduce_sum(input, out, rows, cols, elem)?;
    let kernel = R::standard_kernel(StandardKernel::ReduceSum(elem))?;
    launch_reduce_sum(client, kernel, (input, out), (rows, cols), elem, 1)
}

/// Launches `kernel`, a reduce-sum kernel summing `rows_per_cube` rows per cube, over the
/// `rows × cols` matrix `input` (sums to `out`): one unit or group of units per row. The
/// kernels index with `u32`, so an input of more than [`ELEMENTS_PER_LAUNCH`] elements
/// is summed by launches over views of as many whole rows as fit; no rows launch nothing.
///
/// # Errors
/// As [`ComputeClient::launch`]; [`LaunchError`] for rows of more than
/// [`ELEMENTS_PER_LAUNCH`] elements.
pub fn launch_reduce_sum<R: Runtime>(
    client: &ComputeClient<R>,
    kernel: <R::Server as crate::server::ComputeServer>::Kernel,
    (input, out): (&Handle, &Handle),
    (rows, cols): (usize, usize),
    elem: ElemType,
    rows_per_cube: u32,
) -> Result<(), LaunchError> {
    if cols > ELEMENTS_PER_LAUNCH {
        return Err(LaunchError::unknown(format!(
            "reduce_sum: rows of {cols} elements are longer than one launch sums \
             ({ELEMENTS_PER_LAUNCH})"
        )));
    }
    let launch = |input: &Handle, out: &Handle, rows: usize| {
        let cubes = reduce_cube_count(client.properties(), rows as u64, rows_per_cube);
        let arguments = KernelArguments::new()
            .with_buffers(vec![input.to_binding(), out.to_binding()])
            .with_info(MetadataBindingInfo::custom(vec![word(rows), word(cols)]));
        client.launch(kernel.clone(), CubeCount::new_1d(cubes), arguments)
    };
    let chunk = ELEMENTS_PER_LAUNCH / cols.max(1);
    if rows <= chunk {
        return if rows == 0 {
            Ok(())
        } else {
            launch(input, out, rows)
        };
    }
    let size = elem.size() as u64;
    let mut start = 0;
    while start < rows {
        let count = (rows - start).min(chunk);
        let first = (start * cols) as u64 * size;
        let input_view = input.view(first, (count * cols) as u64 * size)?;
        let out_view = out.view(start as u64 * size, count as u64 * size)?;
        launch(&input_view, &out_view, count)?;
        start += count;
    }
    Ok(())
}

/// Checks the buffers of a reduce-sum of a `rows × cols` matrix (see [`check_holds`]).
///
/// # Errors
/// As [`check_holds`].
pub fn check_reduce_sum(
    input: &Handle,
    out: &Handle,
    rows: usize,
    cols: usize,
    elem: ElemType,
) -> Result<(), LaunchError> {
    check_holds("reduce_sum", "input", input, rows.checked_mul(cols), elem)?;
    check_holds("reduce_sum", "out", out, Some(rows), elem)
}

/// Checks the buffers of a matmul of shape `(m, k, n)` (see [`check_holds`]).
///
/// # Errors
/// As [`check_holds`].
pub fn check_matmul(
    lhs: &Handle,
    rhs: &Handle,
    out: &Handle,
    (m, k, n): (usize, usize, usize),
    elem: ElemType,
) -> Result<(), LaunchError> {
    check_holds("matmul", "lhs", lhs, m.checked_mul(k), elem)?;
    check_holds("matmul", "rhs", rhs, k.checked_mul(n), elem)?;
    check_holds("matmul", "out", out, m.checked_mul(n), elem)
}

/// `out = lhs × rhs` for row-major `lhs` (m×k), `rhs` (k×n), `out` (m×n), by the
/// backend's default matmul.
///
/// ```
/// # use cubert_runtime::{Bytes, ElemType, ops};
/// # let client = cubert_cpu::default_client()?;
/// let lhs = client.create(Bytes::from_elems(vec![1.0f32, 2.0, 3.0, 4.0]))?; // [[1, 2], [3, 4]]
/// let rhs = client.create(Bytes::from_elems(vec![5.0f32, 6.0, 7.0, 8.0]))?; // [[5, 6], [7, 8]]
/// let out = client.empty(4 * 4)?;
/// ops::matmul(&client, &lhs, &rhs, &out, 2, 2, 2, ElemType::F32)?;
/// assert_eq!(client.read_one(out)?.to_elems::<f32>(), vec![19.0, 22.0, 43.0, 50.0]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// As [`launch_matmul`].
#[allow(clippy::too_many_arguments)]
pub fn matmul<R: Runtime>(
    client: &ComputeClient<R>,
    lhs: &Handle,
    rhs: &Handle,
    out: &Handle,
    m: usize,
    k: usize,
    n: usize,
    elem: ElemType,
) -> Result<(), LaunchError> {
    check_matmul(lhs, rhs, out, (m, k, n), elem)?;
    let kernel = StandardKernel::Matmul(elem);
    let tile = R::standard_variants(kernel, client.properties())
        .first()
        .map_or((1, 1), |default| default.tile);
    launch_matmul(
        client,
        R::standard_kernel(kernel)?,
        (lhs, rhs, out),
        (m, k, n),
        elem,
        tile,
    )
}

/// Launches the matmul `kernel` (the standard calling convention: buffers
/// `[lhs, rhs, out]`, info `[m, k, n]`), whose cubes each cover `tile` (`(columns, rows)`)
/// of the output per step: one launch with a cube per tile (within the device's grid
/// limits; the kernels stride over the tiles a grid doesn't cover), or, where `lhs` or
/// `out` holds more than [`ELEMENTS_PER_LAUNCH`] elements, one launch per band of rows
/// over views of them. An empty product launches nothing.
///
/// The buffers are checked to hold their matrices ([`check_matmul`]), and the kernel is
/// then launched without device-side bounds checks (unless `[compilation] bounds_check`
/// asks for them): the standard matmul kernels read and write only inside the shape they
/// are given, so the checks could never fire, and on a GPU they cost a branch per load.
///
/// # Errors
/// As [`ComputeClient::launch`] and [`check_matmul`], and [`LaunchError`] for an `rhs` of
/// more than `u32::MAX` elements or a row of `lhs` or `out` longer than one launch takes
/// (kernels index with `u32`).
pub fn launch_matmul<R: Runtime>(
    client: &ComputeClient<R>,
    kernel: <R::Server as crate::server::ComputeServer>::Kernel,
    (lhs, rhs, out): (&Handle, &Handle, &Handle),
    (m, k, n): (usize, usize, usize),
    elem: ElemType,
    tile: (u32, u32),
) -> Result<(), LaunchError> {
    check_matmul(lhs, rhs, out, (m, k, n), elem)?;
    if k.saturating_mul(n) > u32::MAX as usize || k.max(n) > ELEMENTS_PER_LAUNCH {
        return Err(LaunchError::unknown(format!(
            "matmul: a {k} x {n} right-hand side is larger than a launch indexes \
             ({} elements; rows of at most {ELEMENTS_PER_LAUNCH})",
            u32::MAX
        )));
    }
    if m == 0 || n == 0 {
        return Ok(());
    }
    let max = client.properties().hardware.max_cube_count;
    let launch = |lhs: &Handle, out: &Handle, rows: usize| {
        let cubes = |len: usize, tile: u32, max: u32| {
            (len as u64)
                .div_ceil(u64::from(tile.max(1)))
                .clamp(1, u64::from(max.max(1))) as u32
        };
        let count = CubeCount::new_2d(cubes(n, tile.0, max.0), cubes(rows, tile.1, max.1));
        let arguments = KernelArguments::new()
            .with_buffers(vec![lhs.to_binding(), rhs.to_binding(), out.to_binding()])
            .with_info(MetadataBindingInfo::custom(vec![
                word(rows),
                word(k),
                word(n),
            ]));
        // SAFETY: `lhs` holds `rows × k` elements, `rhs` `k × n` and `out` `rows × n`
        // (checked above for the whole product; a band's views are cut to its rows), and
        // the standard matmul kernels access only `lhs[i][p]`, `rhs[p][j]`, `out[i][j]`
        // for `i < rows`, `p < k`, `j < n` (every load and store is guarded by the shape,
        // clamped lower by the buffers' lengths), shared tiles inside their arrays, and
        // their loops end.
        unsafe { client.launch_unchecked(kernel.clone(), count, arguments) }
    };
    let band = ELEMENTS_PER_LAUNCH / k.max(n).max(1);
    if m <= band {
        return launch(lhs, out, m);
    }
    let size = elem.size() as u64;
    let mut start = 0;
    while start < m {
        let rows = (m - start).min(band);
        let lhs_view = lhs.view((start * k) as u64 * size, (rows * k) as u64 * size)?;
        let out_view = out.view((start * n) as u64 * size, (rows * n) as u64 * size)?;
        launch(&lhs_view, &out_view, rows)?;
        start += rows;
    }
    Ok(())
}
