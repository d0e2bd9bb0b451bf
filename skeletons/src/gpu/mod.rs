//! GPU skeletons: the launch contract with generated PTX ([`abi`]), the host side of a launch
//! ([`launch`]: grids, output lengths, folding partials), the device memory manager
//! ([`memory`], after MEMPHIS 4.2), and (feature `cuda`) the device itself ([`device`]).

pub mod abi;
#[cfg(feature = "cuda")]
pub mod device;
pub mod launch;
pub mod memory;
