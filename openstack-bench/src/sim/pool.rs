//! A scoped thread pool over independent runs (each run is single-threaded and seeded, so
//! results do not depend on the thread count).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// `f` over `items` on `threads` threads, taking items in the order of `order` (costliest
/// first balances better); results in the order of `items`. `done` runs after each item.
pub fn par_map<T: Sync, R: Send + Default + Clone>(
    items: &[T],
    order: &[usize],
    threads: usize,
    f: &(dyn Fn(&T) -> R + Sync),
    done: &(dyn Fn(&T) + Sync),
) -> Vec<R> {
    let next = AtomicUsize::new(0);
    let results = Mutex::new(vec![R::default(); items.len()]);
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1) {
            scope.spawn(|| loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                let Some(&i) = order.get(k) else { break };
                let r = f(&items[i]);
                // std Mutex: held only to store one result, never across an await.
                results.lock().unwrap_or_else(|e| e.into_inner())[i] = r;
                done(&items[i]);
            });
        }
    });
    results.into_inner().unwrap_or_else(|e| e.into_inner())
}
