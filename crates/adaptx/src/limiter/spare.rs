//! The calling thread's spare handle to a limiter.
//!
//! An [`OwnedPermit`](crate::OwnedPermit) holds a reference to its limiter
//! (it may outlive every [`Limiter`](crate::Limiter) handle, and move to
//! another thread). Counting that reference up at admission and down at the
//! end costs two locked instructions, and with two threads admitting on one
//! limiter the count's cache line moves between their CPUs on every
//! request. Instead, a permit that ends on a thread leaves its reference in
//! that thread's one spare slot (a thread-local), and the thread's next owned
//! admission on the same limiter takes it from there: admitting and ending on
//! one thread moves a reference and counts nothing. The slot is the one the
//! rate limiter's lanes use ([`SpareSlot`](crate::sync::SpareSlot)).
//!
//! The cost: each thread keeps at most one reference, to the limiter of the
//! last owned permit it ended, until it ends an owned permit of another
//! limiter or exits. A permit that ends after every `Limiter` handle was
//! dropped keeps nothing, so a limiter dropped with permits in flight is
//! freed with its last permit; a spare kept by a thread from before the drop
//! stays until that thread ends a permit of another limiter or exits
//! (documented on [`Limiter`](crate::Limiter)). Under loom there is no spare
//! slot.

use super::Inner;
use crate::sync::Arc;
#[cfg(not(adaptx_loom))]
use crate::sync::SpareSlot;

#[cfg(not(adaptx_loom))]
std::thread_local! {
    static SPARE: SpareSlot<Inner> = const { SpareSlot::new() };
}

/// A reference to `inner` for a new owned permit: this thread's spare if it
/// is for `inner`, else a new one.
#[inline(always)]
pub(super) fn handle(inner: &Arc<Inner>) -> Arc<Inner> {
    #[cfg(not(adaptx_loom))]
    if let Some(spare) = take(inner) {
        return spare;
    }
    Arc::clone(inner)
}

/// This thread's spare, if it is for `inner`. One thread-local access.
#[cfg(not(adaptx_loom))]
#[inline(always)]
fn take(inner: &Arc<Inner>) -> Option<Arc<Inner>> {
    SPARE
        .try_with(|slot| slot.take_if(|spare| Arc::ptr_eq(spare, inner)))
        .ok()
        .flatten()
}

/// Drops this thread's spare if it is for `inner` (whose last
/// [`Limiter`](crate::Limiter) handle is being dropped).
pub(super) fn forget(inner: &Arc<Inner>) {
    #[cfg(not(adaptx_loom))]
    drop(take(inner));
    #[cfg(adaptx_loom)]
    let _ = inner;
}

/// Keeps `handle`, the reference of a permit that ended, as this thread's
/// spare, unless every [`Limiter`](crate::Limiter) handle of its limiter is
/// gone (then nobody admits on it again, and it is dropped).
#[inline]
pub(super) fn keep(handle: Arc<Inner>) {
    #[cfg(not(adaptx_loom))]
    {
        if !handle.has_handles() {
            return;
        }
        // Released after the borrow ends (or with the closure, if the thread
        // is exiting): the last reference to another limiter drops its
        // state (a user's clock, law or hook) here.
        drop(SPARE.try_with(|slot| slot.put(handle)));
    }
    #[cfg(adaptx_loom)]
    drop(handle);
}

#[cfg(all(test, not(adaptx_loom)))]
mod tests {
    use std::sync::mpsc;

    use crate::Limiter;
    use crate::sync::Arc;

    #[test]
    fn an_owned_permit_ended_on_a_thread_leaves_its_reference_for_the_next() {
        let limiter = Limiter::new();
        limiter.try_acquire_owned().expect("free").success();
        // The handle, and this thread's spare.
        assert_eq!(Arc::strong_count(&limiter.inner), 2);
        let permit = limiter.try_acquire_owned().expect("free");
        // The permit took the spare: no new reference.
        assert_eq!(Arc::strong_count(&limiter.inner), 2);
        drop(permit);
        assert_eq!(Arc::strong_count(&limiter.inner), 2);
    }

    #[test]
    fn a_limiter_dropped_with_a_permit_in_flight_is_freed_with_the_permit() {
        let limiter = Limiter::new();
        let permit = limiter.try_acquire_owned().expect("free");
        let state = Arc::downgrade(&limiter.inner);
        drop(limiter);
        assert!(state.upgrade().is_some());
        permit.success();
        assert!(state.upgrade().is_none(), "the permit kept a spare");
    }

    #[test]
    fn the_thread_that_drops_the_last_handle_gives_up_its_spare() {
        let limiter = Limiter::new();
        limiter.try_acquire_owned().expect("free").success();
        let state = Arc::downgrade(&limiter.inner);
        let clone = limiter.clone();
        drop(limiter);
        assert!(state.upgrade().is_some(), "a handle is left");
        drop(clone);
        assert!(
            state.upgrade().is_none(),
            "the spare outlived the last handle"
        );
    }

    #[test]
    fn a_spare_kept_by_another_thread_goes_when_it_ends_a_permit_of_another_limiter() {
        let (a, b) = (Limiter::new(), Limiter::new());
        let state = Arc::downgrade(&a.inner);
        let (to_main, from_thread) = mpsc::channel();
        let (to_thread, from_main) = mpsc::channel::<()>();
        let theirs = a.clone();
        let worker = std::thread::spawn(move || {
            theirs.try_acquire_owned().expect("free").success();
            drop(theirs);
            to_main.send(()).expect("main waits");
            from_main.recv().expect("main says go");
            b.try_acquire_owned().expect("free").success();
            to_main.send(()).expect("main waits");
            // The thread stays until main has looked.
            from_main.recv().expect("main says done");
        });
        from_thread.recv().expect("the thread ended a permit of a");
        drop(a);
        assert!(state.upgrade().is_some(), "the thread's spare holds a");
        to_thread.send(()).expect("the thread waits");
        from_thread.recv().expect("the thread ended a permit of b");
        assert!(
            state.upgrade().is_none(),
            "a permit of b did not replace the spare"
        );
        to_thread.send(()).expect("the thread waits");
        worker.join().expect("no panic");
    }
}
