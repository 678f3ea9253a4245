//! JIT compilation and linking, modules, functions and kernel launches.

use super::{call, check, check_if_present, DriverError, DriverResult};
use crate::launch_abi::params::KernelParams;
use cudarc::driver::sys::{
    self, CUfunction, CUfunction_attribute, CUjitInputType, CUjit_option, CUlinkState, CUmodule,
    CUresult, CUstream,
};
use std::ffi::{c_void, CStr};

/// `cuModuleLoadDataEx`: JIT-compiles `image` whole-program and loads it
/// into the current context, with the JIT `options` and their `values`
/// (parallel arrays of equal length).
///
/// # Safety
/// Each value is what its option expects; a log buffer's pointer is
/// writable for the size its size option gives, for the call.
pub(crate) unsafe fn module_load_data_ex(
    image: &CStr,
    options: &mut [CUjit_option],
    values: &mut [*mut c_void],
) -> DriverResult<CUmodule> {
    debug_assert_eq!(options.len(), values.len());
    let mut module: CUmodule = std::ptr::null_mut();
    // SAFETY: `image` is NUL-terminated; `options` and `values` are arrays
    // of the length passed, live for the call; the caller's contract.
    check("cuModuleLoadDataEx", || unsafe {
        sys::cuModuleLoadDataEx(
            &mut module,
            image.as_ptr().cast(),
            options.len() as u32,
            options.as_mut_ptr(),
            values.as_mut_ptr(),
        )
    })?;
    Ok(module)
}

/// `cuModuleLoadData`: loads a compiled image (a linked cubin) into the
/// current context.
///
/// # Safety
/// `image` points to a complete cubin, live for the call.
pub(crate) unsafe fn module_load_data(image: *const c_void) -> DriverResult<CUmodule> {
    let mut module: CUmodule = std::ptr::null_mut();
    // SAFETY: `module` is a valid out-pointer; the caller's contract.
    check("cuModuleLoadData", || unsafe {
        sys::cuModuleLoadData(&mut module, image)
    })?;
    Ok(module)
}

/// `cuModuleUnload`: unloads `module`.
///
/// # Safety
/// `module` is live, unloaded once, and none of its functions is used
/// afterwards.
pub(crate) unsafe fn module_unload(module: CUmodule) -> DriverResult<()> {
    // SAFETY: the caller's contract.
    check("cuModuleUnload", || unsafe { sys::cuModuleUnload(module) })
}

/// `cuLinkCreate`: a JIT linker session with the JIT `options` and their
/// `values` (as for [`module_load_data_ex`]).
///
/// # Safety
/// As for [`module_load_data_ex`], for as long as the session lives.
pub(crate) unsafe fn link_create(
    options: &mut [CUjit_option],
    values: &mut [*mut c_void],
) -> DriverResult<CUlinkState> {
    debug_assert_eq!(options.len(), values.len());
    let mut state: CUlinkState = std::ptr::null_mut();
    // SAFETY: arrays of the length passed; `state` is an out-pointer; the
    // caller's contract.
    check("cuLinkCreate", || unsafe {
        sys::cuLinkCreate_v2(
            options.len() as u32,
            options.as_mut_ptr(),
            values.as_mut_ptr(),
            &mut state,
        )
    })?;
    Ok(state)
}

/// `cuLinkAddData`: adds PTX text `ptx` (called `name` in the linker's
/// messages) to the session, compiled as relocatable code.
///
/// # Safety
/// `state` is a live session.
pub(crate) unsafe fn link_add_ptx(state: CUlinkState, ptx: &CStr, name: &CStr) -> DriverResult<()> {
    let bytes = ptx.to_bytes_with_nul();
    // SAFETY: `bytes` is NUL-terminated PTX of the length passed, live for
    // the call; `name` is NUL-terminated; no per-input options.
    check("cuLinkAddData", || unsafe {
        sys::cuLinkAddData_v2(
            state,
            CUjitInputType::CU_JIT_INPUT_PTX,
            bytes.as_ptr() as *mut c_void,
            bytes.len(),
            name.as_ptr(),
            0,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    })
}

/// `cuLinkComplete`: links the session's inputs; the cubin and its size.
/// The cubin belongs to the session: it is freed by [`link_destroy`].
///
/// # Safety
/// `state` is a live session.
pub(crate) unsafe fn link_complete(state: CUlinkState) -> DriverResult<(*const c_void, usize)> {
    let (mut cubin, mut size): (*mut c_void, usize) = (std::ptr::null_mut(), 0);
    // SAFETY: valid out-pointers; the caller's contract.
    check("cuLinkComplete", || unsafe {
        sys::cuLinkComplete(state, &mut cubin, &mut size)
    })?;
    Ok((cubin.cast_const(), size))
}

/// `cuLinkDestroy`: ends a linker session, freeing its cubin.
///
/// # Safety
/// `state` is a live session, destroyed once, its cubin no longer used.
pub(crate) unsafe fn link_destroy(state: CUlinkState) -> DriverResult<()> {
    // SAFETY: the caller's contract.
    check("cuLinkDestroy", || unsafe { sys::cuLinkDestroy(state) })
}

/// `cuModuleGetFunction`: entry `name` of `module`, `None` when the module
/// has no such entry.
///
/// # Safety
/// `module` is a live module of the current context.
pub(crate) unsafe fn module_get_function(
    module: CUmodule,
    name: &CStr,
) -> DriverResult<Option<CUfunction>> {
    let call_name = "cuModuleGetFunction";
    let mut function: CUfunction = std::ptr::null_mut();
    // SAFETY: valid out-pointer, NUL-terminated name; the caller's contract.
    match call(call_name, || unsafe {
        sys::cuModuleGetFunction(&mut function, module, name.as_ptr())
    })? {
        CUresult::CUDA_SUCCESS => Ok(Some(function)),
        CUresult::CUDA_ERROR_NOT_FOUND => Ok(None),
        r => Err(DriverError::new(call_name, r)),
    }
}

/// `cuModuleGetGlobal`: the address and size of module-scope variable
/// `name` of `module`, `None` when the module has no such variable.
///
/// # Safety
/// `module` is a live module of the current context.
pub(crate) unsafe fn module_get_global(
    module: CUmodule,
    name: &CStr,
) -> DriverResult<Option<(sys::CUdeviceptr, usize)>> {
    let call_name = "cuModuleGetGlobal_v2";
    let (mut ptr, mut bytes): (sys::CUdeviceptr, usize) = (0, 0);
    // SAFETY: valid out-pointers, NUL-terminated name; the caller's contract.
    match call(call_name, || unsafe {
        sys::cuModuleGetGlobal_v2(&mut ptr, &mut bytes, module, name.as_ptr())
    })? {
        CUresult::CUDA_SUCCESS => Ok(Some((ptr, bytes))),
        CUresult::CUDA_ERROR_NOT_FOUND => Ok(None),
        r => Err(DriverError::new(call_name, r)),
    }
}

/// Every function of `module` (`cuModuleGetFunctionCount`, then
/// `cuModuleEnumerateFunctions`); `None` on drivers before CUDA 12.4,
/// which cannot list them.
///
/// # Safety
/// `module` is a live module of the current context.
pub(crate) unsafe fn module_functions(module: CUmodule) -> DriverResult<Option<Vec<CUfunction>>> {
    let mut count = 0u32;
    // SAFETY: valid out-pointer; the caller's contract.
    let counted = check_if_present("cuModuleGetFunctionCount", || unsafe {
        sys::cuModuleGetFunctionCount(&mut count, module)
    })?;
    if !counted {
        return Ok(None);
    }
    let mut functions: Vec<CUfunction> = vec![std::ptr::null_mut(); count as usize];
    // SAFETY: `functions` has room for `count` handles; the caller's contract.
    check("cuModuleEnumerateFunctions", || unsafe {
        sys::cuModuleEnumerateFunctions(functions.as_mut_ptr(), count, module)
    })?;
    Ok(Some(functions))
}

/// `cuFuncLoad`: loads `function` onto the device now; `Ok(false)` on
/// drivers before CUDA 12.4, which lack the call.
///
/// # Safety
/// `function` is a function of a live module.
pub(crate) unsafe fn func_load(function: CUfunction) -> DriverResult<bool> {
    // SAFETY: the caller's contract.
    check_if_present("cuFuncLoad", || unsafe { sys::cuFuncLoad(function) })
}

/// `cuFuncGetAttribute`: one attribute of `function`.
///
/// # Safety
/// `function` is a function of a live module.
pub(crate) unsafe fn func_get_attribute(
    function: CUfunction,
    attr: CUfunction_attribute,
) -> DriverResult<i32> {
    let mut v = 0i32;
    // SAFETY: valid out-pointer; the caller's contract.
    check("cuFuncGetAttribute", || unsafe {
        sys::cuFuncGetAttribute(&mut v, attr, function)
    })?;
    Ok(v)
}

/// `cuOccupancyMaxActiveBlocksPerMultiprocessor`: how many blocks of
/// `block_threads` threads and `dynamic_shared` bytes of dynamic shared
/// memory of `function` one SM holds at once.
///
/// # Safety
/// `function` is a function of a live module.
pub(crate) unsafe fn max_active_blocks(
    function: CUfunction,
    block_threads: u32,
    dynamic_shared: u32,
) -> DriverResult<u32> {
    let mut blocks = 0i32;
    // SAFETY: valid out-pointer; the caller's contract.
    check("cuOccupancyMaxActiveBlocksPerMultiprocessor", || unsafe {
        sys::cuOccupancyMaxActiveBlocksPerMultiprocessor(
            &mut blocks,
            function,
            block_threads as i32,
            dynamic_shared as usize,
        )
    })?;
    Ok(blocks.max(0) as u32)
}

/// `cuFuncSetAttribute`: sets one attribute of `function`.
///
/// # Safety
/// `function` is a function of a live module.
pub(crate) unsafe fn func_set_attribute(
    function: CUfunction,
    attr: CUfunction_attribute,
    value: i32,
) -> DriverResult<()> {
    // SAFETY: the caller's contract; the driver checks the value.
    check("cuFuncSetAttribute", || unsafe {
        sys::cuFuncSetAttribute(function, attr, value)
    })
}

/// A launch's geometry and the launch attributes it asks for.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LaunchShape {
    /// Blocks in the grid.
    pub(crate) grid: [u32; 3],
    /// Threads in a block.
    pub(crate) block: [u32; 3],
    /// Dynamic shared memory per block, in bytes.
    pub(crate) shared_bytes: u32,
    /// `CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION`: the kernel
    /// may start before its stream's previous kernel has finished.
    pub(crate) programmatic_stream_serialization: bool,
}

/// `cuLaunchKernel` (`cuLaunchKernelEx` when `shape` asks for a launch
/// attribute): enqueues `function` on `stream` with `shape`'s grid, blocks
/// and dynamic shared memory and the arguments `params` points to (the
/// driver copies them before it returns).
///
/// # Safety
/// `function` and `stream` are live handles of the current context;
/// `params` holds one pointer per parameter of the function, each to a
/// value of the parameter's type; every device pointer among the values
/// is valid for what the kernel does with it while it runs.
pub(crate) unsafe fn launch_kernel(
    function: CUfunction,
    shape: LaunchShape,
    stream: CUstream,
    params: &mut KernelParams<'_>,
) -> DriverResult<()> {
    let LaunchShape {
        grid,
        block,
        shared_bytes,
        programmatic_stream_serialization,
    } = shape;
    if programmatic_stream_serialization {
        // SAFETY: an all-zero attribute is a valid plain-data value; the
        // id and the union member it names are set below.
        let mut attr: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
        attr.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attr.value.programmaticStreamSerializationAllowed = 1;
        let config = sys::CUlaunchConfig {
            gridDimX: grid[0],
            gridDimY: grid[1],
            gridDimZ: grid[2],
            blockDimX: block[0],
            blockDimY: block[1],
            blockDimZ: block[2],
            sharedMemBytes: shared_bytes,
            hStream: stream,
            attrs: &mut attr,
            numAttrs: 1,
        };
        // SAFETY: the caller's contract; `config` and the attribute it
        // points to outlive the call; no `extra` options.
        return check("cuLaunchKernelEx", || unsafe {
            sys::cuLaunchKernelEx(&config, function, params.as_mut_ptr(), std::ptr::null_mut())
        });
    }
    // SAFETY: the caller's contract; no `extra` options.
    check("cuLaunchKernel", || unsafe {
        sys::cuLaunchKernel(
            function,
            grid[0],
            grid[1],
            grid[2],
            block[0],
            block[1],
            block[2],
            shared_bytes,
            stream,
            params.as_mut_ptr(),
            std::ptr::null_mut(),
        )
    })
}
