//! Requests waiting for a slot, served in the order they came.
//!
//! Requests that want the same slots (equal [`DispatchRequest`]s: group, size class, kind and
//! accounts excluded) wait in one line. When a slot frees, only the head of each line gets a turn
//! to try the pool; a head that gets a lease leaves and hands the turn to the next, which may find
//! another free slot. A newcomer whose line is not empty joins its end instead of trying first, so
//! a waiting request is never overtaken by a later one for the same slots. Lines do not hold each
//! other up: a standard-size request does not wait behind a line of 4K ones.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;

use crate::dispatcher::DispatchRequest;

/// Every line of one dispatcher.
#[derive(Debug, Default)]
pub(crate) struct WaitLines {
    lines: Mutex<HashMap<DispatchRequest, VecDeque<Arc<Place>>>>,
    /// Places in all lines: a release pays for the lock only when this is not zero.
    waiting: AtomicUsize,
}

/// One request's place in a line.
#[derive(Debug, Default)]
struct Place {
    /// Woken when it is this place's turn (a stored permit, so a turn given early is not lost).
    turn: Notify,
}

impl WaitLines {
    /// Requests waiting in all lines.
    pub(crate) fn waiting(&self) -> usize {
        self.waiting.load(Ordering::SeqCst)
    }

    /// Whether `request` may try the pool before joining a line: nobody waits in its line.
    pub(crate) fn may_go_first(&self, request: &DispatchRequest) -> bool {
        self.waiting() == 0 || self.lock().get(request).is_none_or(VecDeque::is_empty)
    }

    /// Joins the end of `request`'s line, or `None` when `max` requests already wait.
    pub(crate) fn join(&self, request: &DispatchRequest, max: usize) -> Option<InLine<'_>> {
        let mut lines = self.lock();
        if self.waiting() >= max {
            return None;
        }
        let place = Arc::new(Place::default());
        lines
            .entry(request.clone())
            .or_default()
            .push_back(Arc::clone(&place));
        // Counted before the request's next try, so a release after that try sees it and wakes it.
        self.waiting.fetch_add(1, Ordering::SeqCst);
        Some(InLine {
            lines: self,
            key: request.clone(),
            place,
        })
    }

    /// A slot freed or the accounts changed: the head of every line gets a turn.
    pub(crate) fn wake_heads(&self) {
        if self.waiting() == 0 {
            return;
        }
        for line in self.lock().values() {
            if let Some(head) = line.front() {
                head.turn.notify_one();
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<DispatchRequest, VecDeque<Arc<Place>>>> {
        // The map stays consistent whatever panicked while holding it: every change is one call.
        self.lines.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A request's place in its line, given up when dropped (lease granted, deadline, error or the
/// request abandoned); a head that leaves hands its turn to the next in line.
#[derive(Debug)]
pub(crate) struct InLine<'a> {
    lines: &'a WaitLines,
    key: DispatchRequest,
    place: Arc<Place>,
}

impl InLine<'_> {
    /// Whether this request is first in its line (only the first tries the pool).
    pub(crate) fn is_head(&self) -> bool {
        self.lines
            .lock()
            .get(&self.key)
            .and_then(VecDeque::front)
            .is_some_and(|head| Arc::ptr_eq(head, &self.place))
    }

    /// Resolves when this place is given a turn.
    pub(crate) async fn turn(&self) {
        self.place.turn.notified().await;
    }
}

impl Drop for InLine<'_> {
    fn drop(&mut self) {
        let mut lines = self.lines.lock();
        let Some(line) = lines.get_mut(&self.key) else {
            return;
        };
        let Some(index) = line.iter().position(|place| Arc::ptr_eq(place, &self.place)) else {
            return;
        };
        line.remove(index);
        self.lines.waiting.fetch_sub(1, Ordering::SeqCst);
        match line.front() {
            // The next one may find a slot this one did not need (or did not live to use).
            Some(next) if index == 0 => next.turn.notify_one(),
            Some(_) => {}
            None => {
                lines.remove(&self.key);
            }
        }
    }
}
