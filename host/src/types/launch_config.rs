//! [`LaunchConfig`] (grid, block, dynamic shared memory) and the
//! [`DeviceLimits`] it is validated against: plain data, shared by the
//! front end and both backends.

/// A grid or block extent: the device crate's coordinate type, so a
/// kernel's `block_dim()` and a launch's `block` are one type.
pub use vigil_device::Dim3;

/// Grid, block and dynamic shared memory of a launch, and whether it may
/// overlap the launch before it on its stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LaunchConfig {
    /// Blocks in the grid.
    pub grid: Dim3,
    /// Threads in a block.
    pub block: Dim3,
    /// Dynamic shared memory per block, in bytes.
    pub shared_mem_bytes: u32,
    /// Programmatic dependent launch: the kernel may start before the one
    /// before it on its stream has finished, once that one's blocks have
    /// all called `grid_dependency::launch_dependents` (or exited); it
    /// must call `grid_dependency::wait` before it reads what that kernel
    /// writes (`CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION`).
    /// A sanitized launch, and every launch on the CPU backend, starts
    /// after its predecessor has finished instead, which the kernels
    /// cannot tell apart.
    pub programmatic_stream_serialization: bool,
}

impl LaunchConfig {
    /// A configuration with no dynamic shared memory.
    pub fn new(grid: impl Into<Dim3>, block: impl Into<Dim3>) -> LaunchConfig {
        LaunchConfig {
            grid: grid.into(),
            block: block.into(),
            shared_mem_bytes: 0,
            programmatic_stream_serialization: false,
        }
    }

    /// The same configuration launched with programmatic stream
    /// serialisation (see
    /// [`programmatic_stream_serialization`](Self::programmatic_stream_serialization)).
    ///
    /// ```
    /// use vigil::LaunchConfig;
    /// let c = LaunchConfig::new(132, 256).with_programmatic_stream_serialization();
    /// assert!(c.programmatic_stream_serialization);
    /// ```
    pub fn with_programmatic_stream_serialization(self) -> LaunchConfig {
        LaunchConfig {
            programmatic_stream_serialization: true,
            ..self
        }
    }

    /// The same configuration with `bytes` of dynamic shared memory.
    pub fn with_shared_mem(self, bytes: u32) -> LaunchConfig {
        LaunchConfig {
            shared_mem_bytes: bytes,
            ..self
        }
    }

    /// One thread per element: `block` threads per block and enough blocks
    /// in x to cover `n` (at least one block, so `n = 0` still launches).
    /// A grid too large for the device is reported at launch.
    pub fn for_num_elems(n: usize, block: u32) -> LaunchConfig {
        let blocks = (n as u64).div_ceil(u64::from(block.max(1))).max(1);
        LaunchConfig::new(u32::try_from(blocks).unwrap_or(u32::MAX), block)
    }

    /// A grid-stride loop over `n` elements: like
    /// [`LaunchConfig::for_num_elems`] but with at most `max_blocks` blocks
    /// (e.g. a few per SM, see [`Context::sm_count`](crate::Context::sm_count)).
    pub fn for_grid_stride(n: usize, block: u32, max_blocks: u32) -> LaunchConfig {
        let mut c = LaunchConfig::for_num_elems(n, block);
        c.grid.x = c.grid.x.min(max_blocks.max(1));
        c
    }

    /// Threads in one block.
    pub fn block_threads(&self) -> u64 {
        self.block.volume()
    }

    /// Threads in the whole grid.
    pub fn total_threads(&self) -> u64 {
        self.grid.volume().saturating_mul(self.block.volume())
    }

    /// The configuration for a kernel whose shared stack takes
    /// `stack_bytes` of dynamic shared memory beside `static_bytes` of
    /// static shared memory: at least `stack_bytes` of dynamic shared
    /// memory (more when `self` asks for more), or
    /// [`LaunchConfigError::SharedStackTooLarge`] when the device's
    /// per-block limit (with opt-in) cannot hold the stack. Pure: no GPU
    /// needed.
    ///
    /// ```
    /// use vigil::{DeviceLimits, LaunchConfig, LaunchConfigError};
    ///
    /// let h200 = DeviceLimits {
    ///     max_shared_mem_per_block_optin: 227 * 1024,
    ///     ..DeviceLimits::CUDA_BASELINE
    /// };
    /// let config = LaunchConfig::new(64, 256).with_shared_stack(192 * 1024, 0, &h200)?;
    /// assert_eq!(config.shared_mem_bytes, 192 * 1024);
    /// let too_big = LaunchConfig::new(64, 256).with_shared_stack(240 * 1024, 0, &h200);
    /// assert!(matches!(too_big, Err(LaunchConfigError::SharedStackTooLarge { .. })));
    /// # Ok::<(), LaunchConfigError>(())
    /// ```
    pub fn with_shared_stack(
        self,
        stack_bytes: usize,
        static_bytes: u32,
        limits: &DeviceLimits,
    ) -> Result<LaunchConfig, LaunchConfigError> {
        let limit = limits
            .max_shared_mem_per_block_optin
            .max(limits.max_shared_mem_per_block);
        let fits = u64::try_from(stack_bytes)
            .ok()
            .filter(|&b| b + u64::from(static_bytes) <= u64::from(limit));
        match fits {
            Some(bytes) => Ok(LaunchConfig {
                shared_mem_bytes: self.shared_mem_bytes.max(bytes as u32),
                ..self
            }),
            None => Err(LaunchConfigError::SharedStackTooLarge {
                stack_bytes: stack_bytes as u64,
                static_bytes,
                limit,
            }),
        }
    }

    /// Checks the configuration against device limits. Pure: no GPU needed.
    pub fn validate(&self, limits: &DeviceLimits) -> Result<(), LaunchConfigError> {
        let dims = [
            ("grid.x", self.grid.x, limits.max_grid_dim[0]),
            ("grid.y", self.grid.y, limits.max_grid_dim[1]),
            ("grid.z", self.grid.z, limits.max_grid_dim[2]),
            ("block.x", self.block.x, limits.max_block_dim[0]),
            ("block.y", self.block.y, limits.max_block_dim[1]),
            ("block.z", self.block.z, limits.max_block_dim[2]),
        ];
        if let Some(&(which, ..)) = dims.iter().find(|d| d.1 == 0) {
            return Err(LaunchConfigError::ZeroDim { which });
        }
        let threads = self.block_threads();
        if threads > u64::from(limits.max_threads_per_block) {
            return Err(LaunchConfigError::BlockTooLarge {
                threads,
                limit: limits.max_threads_per_block,
                per_kernel: false,
            });
        }
        if let Some(&(which, value, limit)) = dims.iter().find(|d| d.1 > d.2) {
            return Err(LaunchConfigError::DimTooLarge {
                which,
                value,
                limit,
            });
        }
        self.check_shared(0, limits)
    }

    fn check_shared(
        &self,
        static_bytes: u32,
        limits: &DeviceLimits,
    ) -> Result<(), LaunchConfigError> {
        let limit = limits
            .max_shared_mem_per_block_optin
            .max(limits.max_shared_mem_per_block);
        if u64::from(self.shared_mem_bytes) + u64::from(static_bytes) > u64::from(limit) {
            return Err(LaunchConfigError::SharedMemTooLarge {
                requested: self.shared_mem_bytes,
                static_bytes,
                limit,
            });
        }
        Ok(())
    }

    /// Checks the configuration against the device and one kernel's own
    /// limits (register-bound threads per block, static shared memory).
    pub fn validate_for(
        &self,
        limits: &DeviceLimits,
        max_threads_per_block: u32,
        static_shared_bytes: u32,
    ) -> Result<(), LaunchConfigError> {
        self.validate(limits)?;
        let threads = self.block_threads();
        if threads > u64::from(max_threads_per_block) {
            return Err(LaunchConfigError::BlockTooLarge {
                threads,
                limit: max_threads_per_block,
                per_kernel: true,
            });
        }
        self.check_shared(static_shared_bytes, limits)
    }
}

/// A device's launch limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DeviceLimits {
    /// Maximum threads per block.
    pub max_threads_per_block: u32,
    /// Maximum block extent per dimension.
    pub max_block_dim: [u32; 3],
    /// Maximum grid extent per dimension.
    pub max_grid_dim: [u32; 3],
    /// Shared memory per block without opt-in, in bytes.
    pub max_shared_mem_per_block: u32,
    /// Shared memory per block with opt-in, in bytes.
    pub max_shared_mem_per_block_optin: u32,
}

impl DeviceLimits {
    /// The limits every CUDA device of compute capability 7.0 or later has
    /// (threads 1024; block 1024 x 1024 x 64; grid 2^31-1 x 65535 x 65535;
    /// 48 KiB shared memory, no opt-in assumed).
    pub const CUDA_BASELINE: DeviceLimits = DeviceLimits {
        max_threads_per_block: 1024,
        max_block_dim: [1024, 1024, 64],
        max_grid_dim: [i32::MAX as u32, 65535, 65535],
        max_shared_mem_per_block: 48 * 1024,
        max_shared_mem_per_block_optin: 48 * 1024,
    };
}

impl Default for DeviceLimits {
    fn default() -> DeviceLimits {
        DeviceLimits::CUDA_BASELINE
    }
}

/// What is wrong with a launch configuration.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LaunchConfigError {
    /// A grid or block dimension of zero.
    #[error("{which} is 0 (every grid and block dimension must be at least 1)")]
    ZeroDim {
        /// Which dimension, e.g. `block.y`.
        which: &'static str,
    },
    /// A dimension above the device limit.
    #[error("{which} = {value} exceeds the device limit {limit}")]
    DimTooLarge {
        /// Which dimension, e.g. `grid.y`.
        which: &'static str,
        /// The requested value.
        value: u32,
        /// The device limit.
        limit: u32,
    },
    /// More threads per block than the device (or this kernel) allows.
    #[error("block of {threads} threads exceeds the limit of {limit} threads per block{}", for_kernel(*per_kernel))]
    BlockTooLarge {
        /// Threads per block requested.
        threads: u64,
        /// The limit.
        limit: u32,
        /// True when the limit is the kernel's own (registers), not the device's.
        per_kernel: bool,
    },
    /// More dynamic shared memory than the device allows per block.
    #[error(
        "{requested} bytes of dynamic shared memory plus {static_bytes} static exceed the \
         device limit of {limit} bytes per block"
    )]
    SharedMemTooLarge {
        /// Dynamic shared memory requested.
        requested: u32,
        /// The kernel's static shared memory.
        static_bytes: u32,
        /// The per-block limit (opt-in maximum).
        limit: u32,
    },
    /// A kernel's shared stack (its `shared_stack!` capacity, which a
    /// typed launch gives it as dynamic shared memory) does not fit the
    /// device's shared memory per block beside the kernel's static shared
    /// memory (a sanitized GPU entry adds its own).
    #[error(
        "the kernel's shared stack of {stack_bytes} bytes plus {static_bytes} bytes of static \
         shared memory exceed the device limit of {limit} bytes per block"
    )]
    SharedStackTooLarge {
        /// The stack's capacity.
        stack_bytes: u64,
        /// The kernel's static shared memory (of the entry the launch runs).
        static_bytes: u32,
        /// The per-block limit (opt-in maximum).
        limit: u32,
    },
    /// The kernel is written for one block shape
    /// (`#[kernel(block = (x, y, z))]`) and the launch has another.
    #[error(
        "the kernel is declared for blocks of {} x {} x {} threads (#[kernel(block = ..)]), \
         the launch has {} x {} x {}",
        declared.x, declared.y, declared.z, given.x, given.y, given.z
    )]
    BlockShape {
        /// The block the kernel declares.
        declared: Dim3,
        /// The launch's block.
        given: Dim3,
    },
}

fn for_kernel(per_kernel: bool) -> &'static str {
    if per_kernel {
        " for this kernel (register use)"
    } else {
        ""
    }
}
