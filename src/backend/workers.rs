//! A resizable pool of scheduling workers: a call checks a worker out (waiting while all are
//! busy), uses its private state (RNG, scratch, cache copy) and gives it back on drop.

use parking_lot::Mutex;
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Pool of `size` workers, each with its own state `S`.
#[derive(Debug)]
pub struct WorkerPool<S> {
    permits: Arc<Semaphore>,
    // std-style lock: only pushes and pops, never held across an await.
    idle: Arc<Mutex<Vec<S>>>,
    size: Mutex<usize>,
}

/// A checked-out worker; returns to the pool when dropped.
pub struct Worker<S> {
    state: Option<S>,
    idle: Arc<Mutex<Vec<S>>>,
    _permit: OwnedSemaphorePermit,
}

impl<S> std::ops::Deref for Worker<S> {
    type Target = S;
    fn deref(&self) -> &S {
        self.state.as_ref().expect("state present until drop")
    }
}

impl<S> std::ops::DerefMut for Worker<S> {
    fn deref_mut(&mut self) -> &mut S {
        self.state.as_mut().expect("state present until drop")
    }
}

impl<S> Drop for Worker<S> {
    fn drop(&mut self) {
        if let Some(state) = self.state.take() {
            self.idle.lock().push(state);
        }
    }
}

impl<S: Send + 'static> WorkerPool<S> {
    pub fn new(states: Vec<S>) -> Self {
        let size = states.len();
        WorkerPool {
            permits: Arc::new(Semaphore::new(size)),
            idle: Arc::new(Mutex::new(states)),
            size: Mutex::new(size),
        }
    }

    /// Waits for an idle worker.
    pub async fn acquire(&self) -> Worker<S> {
        let permit = self
            .permits
            .clone()
            .acquire_owned()
            .await
            .expect("worker semaphore is never closed");
        let state = self.idle.lock().pop().expect("one idle state per permit");
        Worker {
            state: Some(state),
            idle: self.idle.clone(),
            _permit: permit,
        }
    }

    pub fn size(&self) -> usize {
        *self.size.lock()
    }

    /// Grows or shrinks the pool to `target` workers; shrinking waits for busy workers to
    /// come back, so no call is interrupted. `make(i)` builds the state of worker `i`.
    pub async fn resize(&self, target: usize, mut make: impl FnMut(usize) -> S) {
        let target = target.max(1);
        let current = self.size();
        if target > current {
            {
                let mut idle = self.idle.lock();
                for i in current..target {
                    idle.push(make(i));
                }
            }
            self.permits.add_permits(target - current);
        } else if target < current {
            let n = (current - target) as u32;
            let permits = self
                .permits
                .acquire_many(n)
                .await
                .expect("worker semaphore is never closed");
            permits.forget();
            let mut idle = self.idle.lock();
            for _ in 0..n {
                idle.pop();
            }
        }
        *self.size.lock() = target;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn resize_keeps_one_state_per_permit() {
        let pool = WorkerPool::new(vec![0usize, 1]);
        pool.resize(5, |i| i).await;
        assert_eq!(pool.size(), 5);
        let held: Vec<_> = futures::future::join_all((0..5).map(|_| pool.acquire())).await;
        assert_eq!(held.len(), 5);
        drop(held);
        pool.resize(2, |i| i).await;
        assert_eq!(pool.size(), 2);
        let a = pool.acquire().await;
        let b = pool.acquire().await;
        assert!(
            tokio::time::timeout(std::time::Duration::from_millis(20), pool.acquire())
                .await
                .is_err()
        );
        drop((a, b));
    }
}
