//! The in-process transport (cargo feature `wasm-plugins`; docs/plugins.md §8): a WebAssembly
//! module run by wasmi, Parity's interpreter, given the same JSON request as a webhook and
//! answering the same JSON. Each call runs in an instance as it was just after instantiation
//! (nothing a call leaves reaches the next) with `fuel` units of fuel (about one per
//! instruction) and at most `memory_pages` pages of 64 KiB; the module imports nothing, so it
//! cannot reach a file, a socket or a clock.
//!
//! An instance is kept after a call that answered and put back as it was — its memory
//! rewritten from an image taken after instantiation, its mutable globals set to their first
//! values (`wasm_reset`), its fuel refilled — so a call does not create, map and zero a new
//! one. A module that grew its memory or failed loses its instance; one whose state a reset
//! cannot put back (it changes a table, drops a segment, has two memories) gets a fresh
//! instance for each call.
//!
//! The ABI: the module exports `memory`, `alloc(len: i32) -> i32` (where Parasol writes the
//! request) and one function named after the event (`select`, `filter`, `weigh`, `claimed`,
//! `move`) taking the request's `(ptr: i32, len: i32)` and returning `ptr << 32 | len` of its
//! answer as an `i64` (length 0: an empty answer, read as `null`).

use super::http::{CallError, MAX_ANSWER_BYTES};
use super::wasm_reset::resettable;
use serde_json::Value;
use std::sync::{Arc, Mutex, PoisonError};
use wasmi::{
    CompilationMode, Config, Engine, Global, Linker, Memory, Module, Store, StoreLimits,
    StoreLimitsBuilder, TrapCode, TypedFunc, Val,
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
    /// The exports of the module's mutable globals (`wasm_reset`), or why its instances
    /// cannot be kept between calls.
    reset: Result<Arc<[String]>, String>,
    /// Instances put back after a call, ready for the next (at most one per caller at a time).
    kept: Arc<Mutex<Vec<Instance>>>,
}

impl std::fmt::Debug for WasmHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmHook")
            .field("module", &self.path)
            .field("export", &self.export)
            .field("fuel", &self.fuel)
            .field("memory_pages", &self.memory_pages)
            .field("reset", &self.reset.as_ref().map(|_| "kept and reset"))
            .finish()
    }
}

/// An instance's handles.
struct Instance {
    store: Store<StoreLimits>,
    memory: Memory,
    alloc: TypedFunc<i32, i32>,
    verb: TypedFunc<(i32, i32), i64>,
    /// What it was after instantiation, if it can be put back so.
    first: Option<First>,
}

/// An instance's state just after instantiation.
struct First {
    memory: Image,
    globals: Vec<(Global, Val)>,
}

/// A memory's first bytes, kept as its runs of zeros and the bytes between them: putting a
/// memory back clears the zero runs (mostly the whole memory) rather than copying them from a
/// second copy, which would read twice as many cold cache lines.
struct Image {
    len: usize,
    /// Where each stretch that is not all zeros starts, and its bytes; zeros everywhere else.
    stretches: Vec<(usize, Box<[u8]>)>,
}

impl Image {
    /// A zero run shorter than this stays inside a stretch.
    const GAP: usize = 256;

    fn of(memory: &[u8]) -> Image {
        let mut stretches: Vec<(usize, Box<[u8]>)> = Vec::new();
        let mut at = 0;
        while let Some(start) = memory[at..].iter().position(|&b| b != 0).map(|p| at + p) {
            // The stretch ends where a run of GAP zeros (or the memory) begins.
            let mut end = start;
            let mut zeros = 0;
            for (i, &b) in memory.iter().enumerate().skip(start) {
                if b == 0 {
                    zeros += 1;
                    if zeros == Self::GAP {
                        break;
                    }
                } else {
                    zeros = 0;
                    end = i + 1;
                }
            }
            stretches.push((start, memory[start..end].into()));
            at = end;
        }
        Image {
            len: memory.len(),
            stretches,
        }
    }

    /// Writes the image over `memory`, which is `self.len` bytes long.
    fn restore(&self, memory: &mut [u8]) {
        let mut at = 0;
        for (start, bytes) in &self.stretches {
            memory[at..*start].fill(0);
            let end = start + bytes.len();
            memory[*start..end].copy_from_slice(bytes);
            at = end;
        }
        memory[at..].fill(0);
    }
}

impl Instance {
    /// Puts the instance back as it was after instantiation; false if it cannot be (it has no
    /// copy of its first state, or its memory grew).
    fn reset(&mut self) -> bool {
        let Some(first) = &self.first else {
            return false;
        };
        if self.memory.data(&self.store).len() != first.memory.len {
            return false;
        }
        first.memory.restore(self.memory.data_mut(&mut self.store));
        first
            .globals
            .iter()
            .all(|(global, value)| global.set(&mut self.store, value.clone()).is_ok())
    }
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
        let compile = |bytes: &[u8]| {
            Module::new(&engine, bytes)
                .map_err(|e| format!("{path:?} is not a valid WebAssembly module: {e}"))
        };
        // Compiled once: with an export for each mutable global when its instances can be
        // reset, else as it is (and as it is, too, for the error naming what is wrong with it).
        let (module, reset) = match resettable(&bytes) {
            Ok(resettable) => match compile(&resettable.bytes) {
                Ok(module) => (module, Ok(resettable.globals.into())),
                Err(_) => (
                    compile(&bytes)?,
                    Err("a fresh instance for each call: its globals cannot be exported".into()),
                ),
            },
            Err(why) => (
                compile(&bytes)?,
                Err(format!("a fresh instance for each call: {why}")),
            ),
        };
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
            reset,
            kept: Arc::default(),
        };
        hook.instantiate()
            .map_err(|e| format!("{path:?}: {}", e.0))?;
        Ok(hook)
    }

    /// Whether an instance is kept between calls, for `/v1/stats`: "kept and reset", or why a
    /// fresh one is made for each call.
    pub fn instances(&self) -> &str {
        match &self.reset {
            Ok(_) => "kept and reset",
            Err(why) => why,
        }
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
        let first = match &self.reset {
            Ok(names) => Some(First {
                memory: Image::of(memory.data(&store)),
                globals: names
                    .iter()
                    .map(|name| {
                        let global = instance.get_global(&store, name).ok_or_else(|| {
                            Fault(format!("lost the export {name} Parasol gave it"))
                        })?;
                        Ok((global, global.get(&store)))
                    })
                    .collect::<Result<_, Fault>>()?,
            }),
            Err(_) => None,
        };
        Ok(Instance {
            store,
            memory,
            alloc,
            verb,
            first,
        })
    }

    /// A kept instance, or a new one.
    fn take(&self) -> Result<Instance, Fault> {
        let kept = self
            .kept
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        match kept {
            Some(mut instance) => {
                instance
                    .store
                    .set_fuel(self.fuel)
                    .map_err(|e| Fault(format!("cannot give it fuel: {e}")))?;
                Ok(instance)
            }
            None => self.instantiate(),
        }
    }

    /// Keeps `instance` for a later call if it can be put back as it was.
    fn keep(&self, mut instance: Instance) {
        if instance.reset() {
            self.kept
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(instance);
        }
    }

    /// Runs the module on `request` (JSON) and reads its JSON answer (empty: `null`).
    /// An instance that failed is dropped; one that answered is kept if it can be reset.
    pub fn call(&self, request: &[u8]) -> Result<Value, CallError> {
        let mut instance = self.take().map_err(|f| CallError::Failed(f.0))?;
        let answer = self
            .exchange(&mut instance, request)
            .map_err(|f| CallError::Failed(f.0))?;
        self.keep(instance);
        Ok(answer)
    }

    fn exchange(&self, instance: &mut Instance, request: &[u8]) -> Result<Value, Fault> {
        let len = i32::try_from(request.len())
            .map_err(|_| Fault("the request is larger than 2 GiB".into()))?;
        let Instance {
            store,
            memory,
            alloc,
            verb,
            ..
        } = instance;
        let ptr = alloc
            .call(&mut *store, len)
            .map_err(|e| self.fault("alloc failed", &e))?;
        memory
            .write(&mut *store, ptr as u32 as usize, request)
            .map_err(|_| {
                Fault(format!(
                    "alloc({len}) returned {ptr}, which is not {len} bytes inside its memory"
                ))
            })?;
        let packed = verb
            .call(&mut *store, (ptr, len))
            .map_err(|e| self.fault(self.export, &e))?;
        let (at, n) = ((packed as u64 >> 32) as usize, packed as u32 as usize);
        if n > MAX_ANSWER_BYTES {
            return Err(Fault(format!(
                "answered {n} bytes, more than {MAX_ANSWER_BYTES}"
            )));
        }
        let mut answer = vec![0; n];
        memory
            .read(&*store, at, &mut answer)
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
#[derive(Debug)]
struct Fault(String);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The ABI around `body`, the `filter` function's own code: a one-page memory whose answers
    /// are `{}` at 0 and `not json` at 16, a bump `alloc` from 4096 kept in a global the module
    /// does not export, and `$seen`, a global it does.
    fn filter_hook(body: &str, fuel: u64) -> (WasmHook, tempfile::TempPath) {
        let text = format!(
            r#"(module
                (memory (export "memory") 1)
                (data (i32.const 0) "{{}}")
                (data (i32.const 16) "not json")
                (global $heap (mut i32) (i32.const 4096))
                (global $seen (export "seen") (mut i32) (i32.const 0))
                (table 1 funcref)
                (func $alloc (export "alloc") (param $len i32) (result i32)
                  (global.get $heap)
                  (global.set $heap (i32.add (global.get $heap) (local.get $len))))
                (func (export "filter") (param $ptr i32) (param $len i32) (result i64)
                  {body}))"#
        );
        let file = tempfile::Builder::new()
            .suffix(".wasm")
            .tempfile()
            .expect("a temporary file")
            .into_temp_path();
        std::fs::write(&file, wat::parse_str(text).expect("valid WAT")).expect("write");
        let hook =
            WasmHook::load(file.to_str().expect("a path"), "filter", fuel, 4).expect("loads");
        (hook, file)
    }

    /// `{}` if the instance is as instantiated (heap, `$seen` and the memory at 1000 as they
    /// started, the request at 4096), else `not json`; then it changes all three.
    const CLEAN_OR_NOT: &str = r#"
        (if (result i64)
            (i32.and
              (i32.and (i32.eqz (global.get $seen)) (i32.eqz (i32.load (i32.const 1000))))
              (i32.and (i32.eq (local.get $ptr) (i32.const 4096))
                       (i32.eq (global.get $heap) (i32.add (i32.const 4096) (local.get $len)))))
          (then (i64.const 2))
          (else (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 8))))
        (global.set $seen (i32.const 1))
        (i32.store (i32.const 1000) (i32.const 1))"#;

    #[test]
    fn a_memory_image_restores_every_byte_and_keeps_only_its_stretches() {
        let mut first = vec![0u8; 4 * PAGE_BYTES];
        first[0] = 1;
        first[10..20].fill(7);
        // 100 zeros between: one stretch; 1,000: two.
        first[120] = 9;
        first[1_120] = 3;
        *first.last_mut().expect("bytes") = 5;
        let image = Image::of(&first);
        let starts: Vec<(usize, usize)> = image
            .stretches
            .iter()
            .map(|(at, bytes)| (*at, bytes.len()))
            .collect();
        assert_eq!(starts, [(0, 121), (1_120, 1), (first.len() - 1, 1)]);
        let mut memory: Vec<u8> = (0..first.len()).map(|i| i as u8 | 1).collect();
        image.restore(&mut memory);
        assert!(memory == first, "every byte as it first was");
        let zeros = Image::of(&[0; 100]);
        assert!(zeros.stretches.is_empty());
    }

    fn kept(hook: &WasmHook) -> usize {
        hook.kept.lock().expect("not poisoned").len()
    }

    #[test]
    fn a_kept_instance_shows_each_call_nothing_an_earlier_call_left() {
        let (hook, _file) = filter_hook(CLEAN_OR_NOT, 10_000);
        assert_eq!(hook.instances(), "kept and reset");
        for call in 0..3 {
            let answer = hook.call(b"{\"hosts\":[]}");
            assert_eq!(answer.ok(), Some(json!({})), "call {call}");
            assert_eq!(kept(&hook), 1, "one instance, kept since the first call");
        }
    }

    #[test]
    fn an_instance_that_grew_its_memory_or_failed_is_not_kept() {
        let grows = format!(
            "(drop (memory.grow (i32.const 1))) (if (i32.ne (memory.size) (i32.const 2)) \
             (then unreachable)) {CLEAN_OR_NOT}"
        );
        let (hook, _file) = filter_hook(&grows, 10_000);
        for call in 0..3 {
            assert_eq!(hook.call(b"{}").ok(), Some(json!({})), "call {call}");
            assert_eq!(kept(&hook), 0, "call {call}");
        }
        let traps_on_one_byte = format!(
            "(if (i32.eq (local.get $len) (i32.const 1)) (then unreachable)) {CLEAN_OR_NOT}"
        );
        let (hook, _file) = filter_hook(&traps_on_one_byte, 10_000);
        assert_eq!(hook.call(b"{}").ok(), Some(json!({})));
        assert_eq!(kept(&hook), 1);
        let trapped = hook.call(b"x").expect_err("traps");
        assert!(trapped.to_string().contains("unreachable"), "{trapped}");
        assert_eq!(kept(&hook), 0, "the instance that trapped is dropped");
        assert_eq!(
            hook.call(b"{}").ok(),
            Some(json!({})),
            "a fresh one answers"
        );
    }

    #[test]
    fn a_kept_instance_gets_all_its_fuel_for_each_call() {
        let burns = format!(
            "(local $i i32) (loop $l (local.set $i (i32.add (local.get $i) (i32.const 1))) \
             (br_if $l (i32.lt_u (local.get $i) (i32.const 1000)))) {CLEAN_OR_NOT}"
        );
        // What one call burns, on an instance of its own.
        let (probe, _file) = filter_hook(&burns, 1_000_000);
        let mut instance = probe.take().expect("an instance");
        probe.exchange(&mut instance, b"{}").expect("answers");
        let burnt = 1_000_000 - instance.store.get_fuel().expect("metered");
        assert!(burnt > 1_000, "the loop burns fuel: {burnt}");
        // Fuel for one and a half calls: a second call on what the first left would run out.
        let (hook, _file) = filter_hook(&burns, burnt * 3 / 2);
        for call in 0..3 {
            assert_eq!(hook.call(b"{}").ok(), Some(json!({})), "call {call}");
        }
        assert_eq!(kept(&hook), 1);
    }

    #[test]
    fn a_module_that_changes_a_table_gets_a_fresh_instance_for_each_call() {
        let sets_a_table = format!("(table.set 0 (i32.const 0) (ref.null func)) {CLEAN_OR_NOT}");
        let (hook, _file) = filter_hook(&sets_a_table, 10_000);
        assert_eq!(
            hook.instances(),
            "a fresh instance for each call: its code changes a table"
        );
        for call in 0..3 {
            assert_eq!(hook.call(b"{}").ok(), Some(json!({})), "call {call}");
            assert_eq!(kept(&hook), 0);
        }
    }
}
