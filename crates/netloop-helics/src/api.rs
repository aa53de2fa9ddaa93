//! The part of HELICS's C API (`helics.h`, HELICS 3) that netloop calls,
//! resolved from `libhelics.so` when a topology joins a federation.
//!
//! Why loaded and not linked: HELICS is an optional, large dependency that
//! Debian does not package; the `helics` wheel on PyPI ships the library,
//! its broker and its headers. Loading it at run time keeps netloop's build
//! free of it and lets a user point at whichever HELICS 3 they run their
//! federation with. The declarations below follow HELICS 3.6's `helics.h`
//! (`HelicsError` is `{int32_t error_code; const char *message;}`, times are
//! doubles in seconds, booleans `int`).

#![allow(unsafe_code)]

use std::ffi::{c_char, c_double, c_int, c_void, CStr};
use std::path::{Path, PathBuf};

/// HELICS's time: seconds as a double (nanosecond resolution inside).
pub type Time = c_double;
/// An opaque HELICS object (federate info, federate, endpoint, message).
pub type Handle = *mut c_void;

/// HELICS's error structure, passed by pointer to every call that can fail.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct RawError {
    /// 0 when the call succeeded.
    pub error_code: i32,
    /// A static or federate-owned string.
    pub message: *const c_char,
}

/// `HELICS_FLAG_REALTIME`.
pub const FLAG_REALTIME: c_int = 16;
/// `HELICS_FLAG_UNINTERRUPTIBLE`.
pub const FLAG_UNINTERRUPTIBLE: c_int = 1;
/// `HELICS_PROPERTY_TIME_RT_LAG`.
pub const PROPERTY_TIME_RT_LAG: c_int = 143;
/// `HELICS_PROPERTY_TIME_RT_LEAD`.
pub const PROPERTY_TIME_RT_LEAD: c_int = 144;
/// `HELICS_PROPERTY_INT_LOG_LEVEL`.
pub const PROPERTY_INT_LOG_LEVEL: c_int = 271;
/// `HELICS_TIME_MAXTIME`: the time a federate is granted when every other
/// federate has left.
pub const TIME_MAXTIME: Time = 9_223_372_036.854_774;

macro_rules! api {
    ($( $(#[$doc:meta])* fn $name:ident ( $($arg:ident : $ty:ty),* ) $(-> $ret:ty)? ; )*) => {
        /// The C API's functions, resolved from the loaded library (which
        /// the table keeps loaded).
        #[allow(non_snake_case)]
        pub struct Helics {
            $( $(#[$doc])* pub $name: unsafe extern "C" fn($($ty),*) $(-> $ret)?, )*
            path: PathBuf,
            _lib: libloading::Library,
        }

        impl Helics {
            /// Loads `path` and resolves every function.
            fn open(path: &Path) -> Result<Helics, String> {
                // SAFETY: loading runs the library's initialisers: HELICS's
                // are its C++ statics, safe to run in any process.
                let lib = unsafe { libloading::Library::new(path) }
                    .map_err(|e| format!("{}: {e}", path.display()))?;
                // SAFETY: each symbol is declared above with the signature
                // of HELICS 3's helics.h.
                unsafe {
                    Ok(Helics {
                        $( $name: *lib
                            .get::<unsafe extern "C" fn($($ty),*) $(-> $ret)?>(
                                concat!(stringify!($name), "\0").as_bytes(),
                            )
                            .map_err(|e| format!("{}: {e}", path.display()))?, )*
                        path: path.to_path_buf(),
                        _lib: lib,
                    })
                }
            }
        }
    };
}

api! {
    /// `const char *helicsGetVersion(void)`.
    fn helicsGetVersion() -> *const c_char;
    /// `HelicsError helicsErrorInitialize(void)`.
    fn helicsErrorInitialize() -> RawError;
    /// `void helicsErrorClear(HelicsError *err)`.
    fn helicsErrorClear(err: *mut RawError);
    /// `HelicsFederateInfo helicsCreateFederateInfo(void)`.
    fn helicsCreateFederateInfo() -> Handle;
    /// `void helicsFederateInfoFree(HelicsFederateInfo fi)`.
    fn helicsFederateInfoFree(fi: Handle);
    /// `void helicsFederateInfoSetCoreTypeFromString(fi, const char *type, err)`.
    fn helicsFederateInfoSetCoreTypeFromString(fi: Handle, ty: *const c_char, err: *mut RawError);
    /// `void helicsFederateInfoSetCoreInitString(fi, const char *init, err)`.
    fn helicsFederateInfoSetCoreInitString(fi: Handle, init: *const c_char, err: *mut RawError);
    /// `void helicsFederateInfoSetBroker(fi, const char *broker, err)`.
    fn helicsFederateInfoSetBroker(fi: Handle, broker: *const c_char, err: *mut RawError);
    /// `void helicsFederateInfoSetFlagOption(fi, int flag, HelicsBool value, err)`.
    fn helicsFederateInfoSetFlagOption(fi: Handle, flag: c_int, value: c_int, err: *mut RawError);
    /// `void helicsFederateInfoSetTimeProperty(fi, int property, HelicsTime value, err)`.
    fn helicsFederateInfoSetTimeProperty(fi: Handle, property: c_int, value: Time, err: *mut RawError);
    /// `void helicsFederateInfoSetIntegerProperty(fi, int property, int value, err)`.
    fn helicsFederateInfoSetIntegerProperty(fi: Handle, property: c_int, value: c_int, err: *mut RawError);
    /// `HelicsFederate helicsCreateMessageFederate(const char *name, fi, err)`.
    fn helicsCreateMessageFederate(name: *const c_char, fi: Handle, err: *mut RawError) -> Handle;
    /// `HelicsEndpoint helicsFederateRegisterGlobalEndpoint(fed, const char *name, const char *type, err)`.
    fn helicsFederateRegisterGlobalEndpoint(fed: Handle, name: *const c_char, ty: *const c_char, err: *mut RawError) -> Handle;
    /// `void helicsFederateEnterExecutingMode(fed, err)`.
    fn helicsFederateEnterExecutingMode(fed: Handle, err: *mut RawError);
    /// `HelicsTime helicsFederateRequestTime(fed, HelicsTime t, err)`.
    fn helicsFederateRequestTime(fed: Handle, t: Time, err: *mut RawError) -> Time;
    /// `void helicsEndpointSendBytesToAt(ep, const void *data, int len, const char *dst, HelicsTime t, err)`.
    fn helicsEndpointSendBytesToAt(ep: Handle, data: *const c_void, len: c_int, dst: *const c_char, t: Time, err: *mut RawError);
    /// `HelicsBool helicsEndpointHasMessage(ep)`.
    fn helicsEndpointHasMessage(ep: Handle) -> c_int;
    /// `HelicsMessage helicsEndpointGetMessage(ep)`.
    fn helicsEndpointGetMessage(ep: Handle) -> Handle;
    /// `int helicsMessageGetByteCount(msg)`.
    fn helicsMessageGetByteCount(msg: Handle) -> c_int;
    /// `void helicsMessageGetBytes(msg, void *data, int max, int *actual, err)`.
    fn helicsMessageGetBytes(msg: Handle, data: *mut c_void, max: c_int, actual: *mut c_int, err: *mut RawError);
    /// `HelicsTime helicsMessageGetTime(msg)`.
    fn helicsMessageGetTime(msg: Handle) -> Time;
    /// `const char *helicsMessageGetOriginalSource(msg)`.
    fn helicsMessageGetOriginalSource(msg: Handle) -> *const c_char;
    /// `void helicsMessageFree(msg)`.
    fn helicsMessageFree(msg: Handle);
    /// `void helicsFederateDisconnect(fed, err)`.
    fn helicsFederateDisconnect(fed: Handle, err: *mut RawError);
    /// `void helicsFederateFree(fed)`.
    fn helicsFederateFree(fed: Handle);
    /// `HelicsQuery helicsCreateQuery(const char *target, const char *query)`.
    fn helicsCreateQuery(target: *const c_char, query: *const c_char) -> Handle;
    /// `const char *helicsQueryExecute(query, fed, err)`.
    fn helicsQueryExecute(query: Handle, fed: Handle, err: *mut RawError) -> *const c_char;
    /// `void helicsQueryFree(query)`.
    fn helicsQueryFree(query: Handle);
    /// `HelicsCore helicsFederateGetCore(fed, err)`.
    fn helicsFederateGetCore(fed: Handle, err: *mut RawError) -> Handle;
    /// `const char *helicsQueryCoreExecute(query, core, err)`.
    fn helicsQueryCoreExecute(query: Handle, core: Handle, err: *mut RawError) -> *const c_char;
    /// `void helicsCoreFree(core)`.
    fn helicsCoreFree(core: Handle);
    /// `HelicsBroker helicsCreateBroker(const char *type, const char *name, const char *init, err)`.
    fn helicsCreateBroker(ty: *const c_char, name: *const c_char, init: *const c_char, err: *mut RawError) -> Handle;
    /// `void helicsBrokerDisconnect(broker, err)`.
    fn helicsBrokerDisconnect(broker: Handle, err: *mut RawError);
    /// `void helicsBrokerFree(broker)`.
    fn helicsBrokerFree(broker: Handle);
    /// `void helicsAbort(int errorCode, const char *errorString)`.
    fn helicsAbort(code: c_int, message: *const c_char);
}

/// The environment variable naming `libhelics.so` explicitly.
pub const LIB_ENV: &str = "NETLOOP_HELICS_LIB";

impl Helics {
    /// Finds and loads HELICS 3: `$NETLOOP_HELICS_LIB` if set; else the
    /// library inside the `helics` Python package of the active virtual
    /// environment's Python or of `python3` (where `pip install helics`
    /// puts it: `helics/install/lib64/libhelics.so.3`); else `libhelics.so.3`
    /// from the dynamic loader's own search (`LD_LIBRARY_PATH`, system
    /// directories). The error lists every place tried.
    pub fn load() -> Result<Helics, String> {
        if let Some(p) = std::env::var_os(LIB_ENV) {
            return Helics::open(Path::new(&p)).map_err(|e| format!("{LIB_ENV}: {e}"));
        }
        let mut tried = Vec::new();
        for python in pythons() {
            match wheel_library(&python) {
                Ok(Some(p)) => match Helics::open(&p) {
                    Ok(h) => return Ok(h),
                    Err(e) => tried.push(e),
                },
                Ok(None) => tried.push(format!("{python}: no `helics` package")),
                Err(e) => tried.push(format!("{python}: {e}")),
            }
        }
        for name in ["libhelics.so.3", "libhelics.so"] {
            match Helics::open(Path::new(name)) {
                Ok(h) => return Ok(h),
                Err(e) => tried.push(e),
            }
        }
        Err(format!(
            "HELICS 3 not found (pip install 'helics>=3.6,<4', or set {LIB_ENV} to libhelics.so); tried: {}",
            tried.join("; ")
        ))
    }

    /// Where the library was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Aborts every federate of this process: a call blocked in HELICS
    /// (waiting for a grant, or for the federation to start) returns with an
    /// error. For a run that must end while HELICS waits on others (Ctrl-C,
    /// the real-time run over).
    pub fn abort(&self, why: &str) {
        let msg = std::ffi::CString::new(why.replace('\0', " ")).unwrap_or_default();
        // SAFETY: HELICS's C API is safe to call from any thread; the
        // string outlives the call.
        unsafe { (self.helicsAbort)(-1, msg.as_ptr()) }
    }

    /// HELICS's version string, e.g. `3.6.1 (2025-02-24)`.
    pub fn version(&self) -> String {
        // SAFETY: returns a static string.
        unsafe { cstr((self.helicsGetVersion)()) }
    }
}

/// A C string HELICS owns, copied (empty for null).
///
/// # Safety
/// `p` is null or a NUL-terminated string valid for the call.
pub(crate) unsafe fn cstr(p: *const c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        // SAFETY: by the caller.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

/// The Pythons whose `helics` package may hold the library: the active
/// virtual environment's first.
fn pythons() -> Vec<String> {
    let mut v = Vec::new();
    if let Some(venv) = std::env::var_os("VIRTUAL_ENV") {
        v.push(Path::new(&venv).join("bin/python").display().to_string());
    }
    v.push("python3".to_string());
    v
}

/// `libhelics.so.3` of `python`'s `helics` package, if it has one. The
/// package is located without importing it (importing loads the library
/// through cffi).
fn wheel_library(python: &str) -> Result<Option<PathBuf>, String> {
    let out = std::process::Command::new(python)
        .args([
            "-c",
            "import importlib.util as u\ns = u.find_spec('helics')\nprint(list(s.submodule_search_locations)[0] if s and s.submodule_search_locations else '')",
        ])
        .output()
        .map_err(|e| e.to_string())?;
    let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if dir.is_empty() {
        return Ok(None);
    }
    for lib in ["install/lib64/libhelics.so.3", "install/lib/libhelics.so.3"] {
        let p = Path::new(&dir).join(lib);
        if p.exists() {
            return Ok(Some(p));
        }
    }
    Ok(None)
}
