//! The in-process transport (cargo feature `wasm-plugins`; docs/plugins.md §8): a WebAssembly
//! module run by wasmi, Parity's interpreter, given the same JSON request as a webhook and
//! answering the same JSON. Each call runs in a fresh instance (nothing is kept between calls)
//! with `fuel` units of fuel (about one per instruction) and at most `memory_pages` pages of
//! 64 KiB; the module imports nothing, so it cannot reach a file, a socket or a clock.
//!
//! The ABI: the module exports `memory`, `alloc(len: i32) -> i32` (where Parasol writes the
//! request) and one function named after the event (`select`, `filter`, `weigh`, `claimed`,
//! `move`) taking the request's `(ptr: i32, len: i32)` and returning `ptr << 32 | len` of its
//! answer as an `i64` (length 0: an empty answer, read as `null`).

use super::http::{CallError, MAX_ANSWER_BYTES};
use serde_json::Value;
use wasmi::{
    CompilationMode, Config, Engine, Linker, Memory, Module, Store, StoreLimits,
    StoreLimitsBuilder, TrapCode, TypedFunc,
};

/// A WebAssembly page.
const PAGE_BYTES: usize = 64 * 1024;

/// One plugin's module, compiled once at start (and on each reload).
#[derive(Clone)]
pub struct WasmHook {
    engine: Engine,
    module: Module,
    path: String,
    export: &'static str,
    fuel: u64,
    memory_pages: u32,
}

impl std::fmt::Debug for WasmHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmHook")
            .field("module", &self.path)
            .field("export", &self.export)
            .field("fuel", &self.fuel)
            .field("memory_pages", &self.memory_pages)
            .finish()
    }
}

/// A fresh instance's handles.
struct Instance {
    store: Store<StoreLimits>,
    memory: Memory,
    alloc: TypedFunc<i32, i32>,
    verb: TypedFunc<(i32, i32), i64>,
}

impl WasmHook {
    /// Reads and compiles the module at `path` and checks, in one trial instance, that it
    /// exports what the ABI asks for `export` (the event's name).
    pub fn load(
        path: &str,
        export: &'static str,
        fuel: u64,
        memory_pages: u32,
    ) -> Result<Self, String> {
        let bytes = std::fs::read(path).map_err(|e| format!("cannot read {path:?}: {e}"))?;
        let mut config = Config::default();
        config.consume_fuel(true);
        config.compilation_mode(CompilationMode::Eager);
        let engine = Engine::new(&config);
        let module = Module::new(&engine, &bytes)
            .map_err(|e| format!("{path:?} is not a valid WebAssembly module: {e}"))?;
        if let Some(import) = module.imports().next() {
            return Err(format!(
                "{path:?} imports {}::{}: a plugin module may import nothing",
                import.module(),
                import.name()
            ));
        }
        let hook = WasmHook {
            engine,
            module,
            path: path.to_string(),
            export,
            fuel,
            memory_pages,
        };
        hook.instantiate()
            .map_err(|e| format!("{path:?}: {}", e.0))?;
        Ok(hook)
    }

    /// The module's path.
    pub fn path(&self) -> &str {
        &self.path
    }

    pub fn fuel(&self) -> u64 {
        self.fuel
    }

    pub fn memory_pages(&self) -> u32 {
        self.memory_pages
    }

    fn instantiate(&self) -> Result<Instance, Fault> {
        let limits = StoreLimitsBuilder::new()
            .memory_size(self.memory_pages as usize * PAGE_BYTES)
            .trap_on_grow_failure(true)
            .instances(1)
            .build();
        let mut store = Store::new(&self.engine, limits);
        store.limiter(|limits| limits);
        store
            .set_fuel(self.fuel)
            .map_err(|e| Fault(format!("cannot give it fuel: {e}")))?;
        let linker = Linker::<StoreLimits>::new(&self.engine);
        let instance = linker
            .instantiate_and_start(&mut store, &self.module)
            .map_err(|e| self.fault("cannot be instantiated", &e))?;
        let memory = instance
            .get_memory(&store, "memory")
            .ok_or_else(|| Fault("exports no memory named \"memory\"".into()))?;
        let alloc = instance
            .get_typed_func::<i32, i32>(&store, "alloc")
            .map_err(|e| Fault(format!("exports no function alloc(i32) -> i32: {e}")))?;
        let verb = instance
            .get_typed_func::<(i32, i32), i64>(&store, self.export)
            .map_err(|e| {
                Fault(format!(
                    "exports no function {}(i32, i32) -> i64: {e}",
                    self.export
                ))
            })?;
        Ok(Instance {
            store,
            memory,
            alloc,
            verb,
        })
    }

    /// Runs the module on `request` (JSON) and reads its JSON answer (empty: `null`).
    pub fn call(&self, request: &[u8]) -> Result<Value, CallError> {
        self.exchange(request).map_err(|f| CallError::Failed(f.0))
    }

    fn exchange(&self, request: &[u8]) -> Result<Value, Fault> {
        let len = i32::try_from(request.len())
            .map_err(|_| Fault("the request is larger than 2 GiB".into()))?;
        let Instance {
            mut store,
            memory,
            alloc,
            verb,
        } = self.instantiate()?;
        let ptr = alloc
            .call(&mut store, len)
            .map_err(|e| self.fault("alloc failed", &e))?;
        memory
            .write(&mut store, ptr as u32 as usize, request)
            .map_err(|_| {
                Fault(format!(
                    "alloc({len}) returned {ptr}, which is not {len} bytes inside its memory"
                ))
            })?;
        let packed = verb
            .call(&mut store, (ptr, len))
            .map_err(|e| self.fault(self.export, &e))?;
        let (at, n) = ((packed as u64 >> 32) as usize, packed as u32 as usize);
        if n > MAX_ANSWER_BYTES {
            return Err(Fault(format!(
                "answered {n} bytes, more than {MAX_ANSWER_BYTES}"
            )));
        }
        let mut answer = vec![0; n];
        memory
            .read(&store, at, &mut answer)
            .map_err(|_| Fault(format!("answered {n} bytes at {at}, outside its memory")))?;
        if answer.iter().all(u8::is_ascii_whitespace) {
            return Ok(Value::Null);
        }
        serde_json::from_slice(&answer)
            .map_err(|e| Fault(format!("answered a body that is not JSON: {e}")))
    }

    /// Names what went wrong in a call of the module: out of fuel, past its memory, a trap.
    fn fault(&self, what: &str, e: &wasmi::Error) -> Fault {
        Fault(match e.as_trap_code() {
            Some(TrapCode::OutOfFuel) => format!(
                "ran out of fuel ({} units) in {what}: an endless loop, or raise `fuel`",
                self.fuel
            ),
            Some(TrapCode::GrowthOperationLimited) => format!(
                "went past its memory limit of {} pages in {what}",
                self.memory_pages
            ),
            Some(code) => format!("trapped in {what}: {code}"),
            None if e.to_string().contains("limit") => format!(
                "went past its memory limit of {} pages in {what}: {e}",
                self.memory_pages
            ),
            None => format!("{what}: {e}"),
        })
    }
}

/// Why a module's call brought no answer.
struct Fault(String);
