use super::*;

fn both() -> [PoolKind; 2] {
    [PoolKind::LockFree, PoolKind::Mutex]
}

#[test]
fn alloc_all_then_exhausted_then_release() {
    for kind in both() {
        let pool = BufferPool::new(kind, 130, 32).unwrap();
        let mut held: Vec<_> = (0..130).map(|_| pool.alloc().unwrap()).collect();
        let mut idx: Vec<_> = held.iter().map(|b| b.index()).collect();
        idx.sort_unstable();
        idx.dedup();
        assert_eq!(idx.len(), 130, "{kind:?}: distinct buffers");
        assert!(pool.alloc().is_none());
        assert_eq!(pool.free_count(), 0);
        held.truncate(10);
        assert_eq!(pool.free_count(), 120);
        drop(held);
        assert_eq!(pool.free_count(), 130);
        assert!(pool.alloc().is_some());
    }
}

#[test]
fn clone_counts_and_last_drop_releases() {
    for kind in both() {
        let pool = BufferPool::new(kind, 4, 64).unwrap();
        let mut a = pool.alloc().unwrap();
        a.set_view(16, 32).unwrap().fill(7);
        let b = a.clone();
        assert_eq!(a.ref_count(), 2);
        assert!(!a.is_unique());
        assert_eq!(a.set_view(0, 1).unwrap_err(), BufError::Shared);
        assert_eq!(b.as_slice(), &[7u8; 16][..]);
        assert_eq!(pool.free_count(), 3);
        drop(a);
        assert!(b.is_unique());
        assert_eq!(pool.free_count(), 3);
        drop(b);
        assert_eq!(pool.free_count(), 4);
    }
}

/// Issue 17: failed steals must not advance other stripes' cursors
/// until one wraps (2^32 of them) and carries into `end`, which made the
/// run look non-empty again and handed out buffers that were still owned.
/// The cursors start just below the wrap so a few failed allocations
/// reach it.
#[test]
fn cursor_near_wrap_never_hands_out_an_owned_buffer() {
    let pool = BufferPool::new(PoolKind::LockFree, 4, 32).unwrap();
    let held: Vec<_> = (0..4).map(|_| pool.alloc().unwrap()).collect();
    assert_eq!(pool.free_count(), 0);
    // Every run exhausted, cursors a few steps below the 32-bit wrap.
    pool.set_all_cursors(u32::MAX - 2, 0);
    for attempt in 0..8 {
        if let Some(b) = pool.alloc() {
            panic!(
                "attempt {attempt}: alloc handed out buffer {} while it is owned \
                 (refs {})",
                b.index(),
                b.ref_count()
            );
        }
    }
    drop(held);
    assert_eq!(pool.free_count(), 4);
    let again: Vec<_> = (0..4).map(|_| pool.alloc().unwrap()).collect();
    let mut idx: Vec<_> = again.iter().map(|b| b.index()).collect();
    idx.sort_unstable();
    assert_eq!(idx, [0, 1, 2, 3]);
}

/// The reference count is the ownership word: even a run that (wrongly)
/// names an owned buffer cannot make `alloc` hand it out.
#[test]
fn alloc_skips_an_owned_buffer_named_by_a_run() {
    let pool = BufferPool::new(PoolKind::LockFree, 4, 32).unwrap();
    let held: Vec<_> = (0..4).map(|_| pool.alloc().unwrap()).collect();
    pool.set_all_cursors(0, 4);
    assert!(pool.alloc().is_none(), "every buffer is owned");
    drop(held);
    assert_eq!(pool.free_count(), 4);
}

#[test]
fn push_front_claims_headroom_once_when_shared() {
    let pool = BufferPool::new(PoolKind::LockFree, 4, 64).unwrap();
    let mut a = pool.alloc().unwrap();
    a.set_view(32, 40).unwrap().fill(1);
    let mut down = a.clone();
    down.push_front(8).unwrap().fill(2);
    assert_eq!(down.start(), 24);
    // The retained handle sees its own bytes unchanged.
    assert_eq!(a.as_slice(), &[1u8; 8][..]);
    // A second shared handle from the same start cannot claim the same bytes.
    let mut again = a.clone();
    assert_eq!(again.push_front(8).unwrap_err(), BufError::Claimed);
    let copy = again.copy().unwrap();
    assert_eq!(copy.as_slice(), a.as_slice());
    assert!(copy.is_unique());
    assert_eq!(
        down.push_front(100).unwrap_err(),
        BufError::NoHeadroom {
            need: 100,
            have: 24
        }
    );
}
