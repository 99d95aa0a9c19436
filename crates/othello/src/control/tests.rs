use super::*;

/// A tight (dense) structure with a stash: long lists and trees of
/// every size, for the tests of removal and tree searches.
fn dense() -> Config {
    Config {
        sizing: crate::Sizing::Tight,
        stash_capacity: 64,
        ..Config::default()
    }
}

/// Where `key`'s edge sits in its two adjacency lists: (not the head of
/// A's list, not the head of B's list).
fn list_positions(o: &Othello<u64>, key: u64) -> (bool, bool) {
    let e = o.find(&key).expect("present");
    let Edge { a, b, .. } = o.edges[e as usize];
    (o.head(a) != e, o.head(o.meta.ma + b) != e)
}

/// Removal finds the key in A's list and unlinks it there and from B's
/// list in one pass per list: removals of edges at the head, in the
/// middle and at the end of both lists (a small structure crowded with
/// keys, so lists are long), each followed by a full check.
#[test]
fn removal_unlinks_from_any_list_position() {
    let cfg = dense();
    let n = 3000u64;
    let mut o = Othello::with_capacity(cfg, n as usize).unwrap();
    let keys: Vec<u64> = (0..n)
        .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15))
        .collect();
    for &k in &keys {
        o.insert(k, k & 0xff).unwrap();
    }
    let (mut mid_a, mut mid_b, mut stashed) = (0, 0, 0);
    // Remove in an order unrelated to insertion (lists are LIFO).
    let mut order = keys.clone();
    order.sort_unstable_by_key(|k| k.rotate_left(29) ^ 0x5555);
    for (i, &k) in order.iter().enumerate() {
        let e = o.find(&k).unwrap();
        if o.edges[e as usize].next_a == STASHED {
            stashed += 1;
        } else {
            let (a, b) = list_positions(&o, k);
            mid_a += a as u32;
            mid_b += b as u32;
        }
        assert!(!o.remove(&k).unwrap().is_rebuild());
        assert_eq!(o.get(&k), None);
        assert_eq!(o.remove(&k), Err(UpdateError::NotFound(format!("{k:?}"))));
        if i % 97 == 0 {
            o.check_invariants().unwrap();
            for &r in &order[i + 1..] {
                assert_eq!(o.get(&r), Some(r & 0xff), "key {r} lost");
            }
        }
    }
    assert!(o.is_empty());
    o.check_invariants().unwrap();
    // The crowded structure must have exercised the non-head cases.
    assert!(mid_a > 50 && mid_b > 50, "{mid_a} {mid_b} {stashed}");
}

/// The same through `apply_batch`, whose removals take the key's
/// vertices from the batch's precomputed table and whose prefetch
/// stages read list heads a few operations early (stale by then when
/// an earlier removal in the batch changed the list).
#[test]
fn batched_removal_unlinks_from_any_list_position() {
    let cfg = dense();
    let n = 3000u64;
    let keys: Vec<u64> = (0..n)
        .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15))
        .collect();
    let mut o = Othello::with_capacity(cfg, n as usize).unwrap();
    o.apply_batch(keys.iter().map(|&k| BatchOp::Insert(k, k & 0xff)).collect())
        .unwrap();
    let mut order = keys.clone();
    order.sort_unstable_by_key(|k| k.rotate_left(29) ^ 0x5555);
    let mut mid = 0;
    for (c, chunk) in order.chunks(61).enumerate() {
        mid += chunk
            .iter()
            .filter(|&&k| {
                o.edges[o.find(&k).unwrap() as usize].next_a != STASHED
                    && list_positions(&o, k) != (false, false)
            })
            .count();
        // Alters between the removals keep the searches' prefetch busy.
        let mut batch: Vec<BatchOp<u64>> = Vec::new();
        for &k in chunk {
            batch.push(BatchOp::Remove(k));
        }
        let done = (c + 1) * 61;
        for &k in order.iter().skip(done).step_by(7).take(20) {
            batch.push(BatchOp::Alter(k, (k & 0xff) ^ 0x55));
            batch.push(BatchOp::Alter(k, k & 0xff));
        }
        assert!(!o.apply_batch(batch).unwrap().is_rebuild());
        for &k in chunk {
            assert_eq!(o.get(&k), None);
        }
        o.check_invariants().unwrap();
        for &r in order.iter().skip(done) {
            assert_eq!(o.get(&r), Some(r & 0xff), "key {r} lost");
        }
    }
    assert!(o.is_empty());
    assert!(mid > 100, "{mid}");
}

/// Vertices of the tree of `x` without crossing edge `skip`, by a plain
/// walk (the reference for the lock-step search and its shortcuts).
fn side_size(o: &Othello<u64>, x: u32, skip: u32) -> usize {
    let mut seen = std::collections::HashSet::from([x]);
    let mut stack = vec![x];
    while let Some(v) = stack.pop() {
        let mut e = o.head(v);
        while e != NIL {
            let (y, next) = o.adj_next(e, v);
            if e != skip && seen.insert(y) {
                stack.push(y);
            }
            e = next;
        }
    }
    seen.len()
}

/// An alter writes exactly the smaller side of its key's tree (one slot
/// for a leaf, two for an end whose other edge leads to a leaf, the
/// lock-step search otherwise), and an insert joining two trees writes
/// the smaller tree. A dense (tight) structure, so trees of every size
/// up to dozens of vertices occur; alters one by one and in batches.
#[test]
fn updates_write_the_smaller_side() {
    let cfg = dense();
    let n = 4000u64;
    let keys: Vec<u64> = (0..n)
        .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x1234)
        .collect();
    let mut o = Othello::with_capacity(cfg, n as usize).unwrap();
    let mut joins = 0;
    for &k in &keys {
        let (_, xa, xb) = o.locate(&k);
        let lone = o.head(xa) == NIL || o.head(xb) == NIL;
        let (sa, sb) = (side_size(&o, xa, NIL), side_size(&o, xb, NIL));
        let writes = o.insert(k, k & 0xff).unwrap().writes(0).len();
        let e = o.find(&k).unwrap();
        if o.edges[e as usize].next_a == STASHED {
            continue;
        }
        if lone {
            assert!(writes <= 1, "key {k}: {writes}");
        } else {
            // A flip by a zero difference writes nothing.
            assert!(
                writes == sa.min(sb) || writes == 0,
                "{k}: {writes} {sa} {sb}"
            );
            joins += (sa.min(sb) > 2) as u32;
        }
    }
    let mut sizes = [0u32; 8];
    let mut batch = Vec::new();
    let mut expected = 0;
    for (i, &k) in keys.iter().enumerate() {
        let e = o.find(&k).unwrap();
        if o.edges[e as usize].next_a == STASHED {
            o.alter(&k, (k & 0xff) ^ 0x55).unwrap();
            continue;
        }
        let Edge { a, b, .. } = o.edges[e as usize];
        let small = side_size(&o, a, e).min(side_size(&o, o.meta.ma + b, e));
        sizes[small.min(7)] += 1;
        if i % 2 == 0 {
            let writes = o.alter(&k, (k & 0xff) ^ 0x55).unwrap().writes(0).len();
            assert_eq!(writes, small, "key {k}");
        } else {
            batch.push(BatchOp::Alter(k, (k & 0xff) ^ 0x55));
            expected += small;
        }
    }
    let change = o.apply_batch(batch).unwrap();
    assert_eq!(change.writes(0).len(), expected);
    o.check_invariants().unwrap();
    for &k in &keys {
        assert_eq!(o.get(&k), Some((k & 0xff) ^ 0x55));
    }
    // Every shape was exercised: leaves, two-vertex sides, searches.
    assert!(sizes[1] > 100 && sizes[2] > 100 && sizes[3..].iter().sum::<u32>() > 100);
    assert!(sizes[7] > 10 && joins > 100, "{sizes:?} {joins}");
}

#[test]
fn col_words_makes_cols_copies() {
    for cols in [1, 2, 8, 9, 64] {
        let w = col_words(cols, 0x5a);
        assert_eq!(w.len(), cols);
        assert!(w.iter().all(|&x| x == 0x5a));
    }
}

/// Overwrite the capacity field of a saved control state (offset 64: magic,
/// version, widths, columns, stash, four u64 seeds, ma, mb) and recompute
/// the trailing checksum, as a forger would.
fn forge_capacity(bytes: &[u8], capacity: u64) -> Vec<u8> {
    let mut b = bytes[..bytes.len() - 8].to_vec();
    b[64..72].copy_from_slice(&capacity.to_le_bytes());
    crate::persist::finish(&mut b);
    b
}

#[test]
fn load_refuses_a_forged_capacity_beyond_the_slot_arrays() {
    let o = Othello::<u64>::build(Config::default(), (0..1000u64).map(|k| (k, k & 1))).unwrap();
    let saved = o.save();
    // The unforged file and one rewritten with its own capacity load.
    assert!(Othello::<u64>::load(&forge_capacity(&saved, o.capacity as u64)).is_ok());
    for cap in [1u64 << 32, 1 << 31, o.meta.mb as u64 + 1, 999] {
        let err = Othello::<u64>::load(&forge_capacity(&saved, cap))
            .err()
            .unwrap_or_else(|| panic!("capacity {cap} loaded"));
        assert!(err.to_string().contains("capacity"), "{err}");
    }
}

#[test]
fn capacity_beyond_memory_is_refused_with_the_bytes_needed() {
    let cfg = Config::default();
    let bytes = Othello::<u64>::bytes_for_capacity(&cfg, 1 << 31);
    assert!(bytes > 1 << 36, "{bytes}");
    // `u128` sizes past the address space are refused without any attempt.
    let tiny = Othello::<u64>::probe_memory(&cfg, 1000);
    assert!(tiny.is_ok());
    let huge = Config {
        columns: 4096,
        ..Config::default()
    };
    let err = Othello::<u64>::with_capacity(huge, 1 << 31).err().unwrap();
    assert!(
        err.to_string().contains("needs") && err.to_string().contains("bytes"),
        "{err}"
    );
}
