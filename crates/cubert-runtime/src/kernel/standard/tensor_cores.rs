//! The tensor-core matmuls as one set of tilings: the plane's (`mma.sync` tiles,
//! [`super::matmul_mma`]) and the plane group's (`wgmma` on Hopper,
//! [`super::matmul_group_mma`]), so that the tuner and the bench try both on a device
//! that has both and pick by speed.

use super::matmul_group_mma::{GROUP_MMA_TILINGS, GroupMmaTiling, matmul_group_tensor_cores};
use super::matmul_mma::{MMA_TILINGS, MmaTiling, matmul_tensor_cores};
use crate::client::ComputeClient;
use crate::elem::ElemType;
use crate::error::LaunchError;
use crate::handle::Handle;
use crate::properties::Features;
use crate::runtime::Runtime;

/// A tiling of one of the tensor-core matmuls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TensorCoreTiling {
    /// A tiling of the plane's matmul ([`matmul_tensor_cores`]).
    Plane(MmaTiling),
    /// A tiling of the plane group's matmul ([`matmul_group_tensor_cores`]).
    PlaneGroup(GroupMmaTiling),
}

impl TensorCoreTiling {
    /// The tiling's name (the plane group's start with `w`).
    pub fn name(&self) -> String {
        match self {
            Self::Plane(tiling) => tiling.name(),
            Self::PlaneGroup(tiling) => tiling.name(),
        }
    }

    /// Shared memory a cube uses, in bytes, for `elem`.
    pub fn shared_bytes(&self, elem: ElemType) -> u32 {
        match self {
            Self::Plane(tiling) => tiling.shared_bytes(elem),
            Self::PlaneGroup(tiling) => tiling.shared_bytes(),
        }
    }

    /// `out = lhs × rhs` with this tiling (see [`matmul_tensor_cores`] and
    /// [`matmul_group_tensor_cores`]).
    ///
    /// # Errors
    /// The chosen kernel's.
    pub fn launch<R: Runtime>(
        &self,
        client: &ComputeClient<R>,
        (lhs, rhs, out): (&Handle, &Handle, &Handle),
        shape: (usize, usize, usize),
        elem: ElemType,
    ) -> Result<(), LaunchError> {
        match self {
            Self::Plane(tiling) => matmul_tensor_cores(client, lhs, rhs, out, shape, elem, tiling),
            Self::PlaneGroup(tiling) => {
                matmul_group_tensor_cores(client, lhs, rhs, out, shape, elem, tiling)
            }
        }
    }
}

/// The tilings that run `elem` on a device with `features` and `shared_max` bytes of
/// shared memory per cube, the default first: the plane group's where the device has its
/// operation (`Features::plane_group_mma`) and `elem` is `bf16` or `f16`, then the plane's
/// ([`MMA_TILINGS`]) where it has tensor cores (`Features::plane_mma`). Empty when none
/// applies.
pub fn tensor_core_tilings(
    features: &Features,
    elem: ElemType,
    shared_max: usize,
) -> Vec<TensorCoreTiling> {
    let mut tilings = Vec::new();
    if features.plane_group_mma && matches!(elem, ElemType::BF16 | ElemType::F16) {
        tilings.extend(GROUP_MMA_TILINGS.map(TensorCoreTiling::PlaneGroup));
    }
    if features.plane_mma {
        tilings.extend(MMA_TILINGS.map(TensorCoreTiling::Plane));
    }
    tilings.retain(|tiling| tiling.shared_bytes(elem) as usize <= shared_max);
    tilings
}
