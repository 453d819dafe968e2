//! Unit tests of the spool files: durability across a "dead" owner, locking, corrupt lines.

use super::*;

fn record(i: usize) -> UsageRecord {
    UsageRecord::new(format!("spool-req-{i}"), "/v1/images/generations", "gpt-image-2")
}

async fn drain(spool: &mut UsageSpool, batch_size: usize) -> (Vec<String>, ReadSummary) {
    let mut seen = Vec::new();
    let mut cursor = spool.start_replay();
    while let Some(batch) = spool.next_batch(&mut cursor, batch_size) {
        assert!(batch.len() <= batch_size);
        seen.extend(batch.iter().map(|r| r.request_id.clone()));
    }
    spool.finish_replay(&cursor);
    (seen, cursor.summary)
}

fn spool_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
}

#[tokio::test]
async fn appended_records_are_read_back_in_batches_then_forgotten() {
    let dir = tempfile::tempdir().unwrap();
    let mut spool = UsageSpool::open(dir.path()).unwrap();
    assert!(spool.is_empty());
    let records: Vec<UsageRecord> = (0..7).map(record).collect();
    spool.append(&records[..3]).unwrap();
    spool.append(&records[3..]).unwrap();
    assert_eq!(spool.own_records(), 7);
    assert!(!spool.is_empty());

    let (seen, summary) = drain(&mut spool, 3).await;
    let expected: Vec<String> = records.iter().map(|r| r.request_id.clone()).collect();
    assert_eq!(seen, expected);
    assert_eq!(summary.records, 7);
    assert!(spool.is_empty());
    assert_eq!(std::fs::metadata(spool.path()).unwrap().len(), 0);
    let (again, _) = drain(&mut spool, 3).await;
    assert!(again.is_empty());
}

#[tokio::test]
async fn a_failed_replay_forgets_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut spool = UsageSpool::open(dir.path()).unwrap();
    spool.append(&(0..5).map(record).collect::<Vec<_>>()).unwrap();
    // Two batches read, then the database fails: the replay is abandoned unfinished.
    let mut cursor = spool.start_replay();
    assert_eq!(spool.next_batch(&mut cursor, 2).unwrap().len(), 2);
    assert_eq!(spool.next_batch(&mut cursor, 2).unwrap().len(), 2);
    assert_eq!(spool.own_records(), 5);
    let (seen, _) = drain(&mut spool, 2).await;
    assert_eq!(seen.len(), 5);
}

#[tokio::test]
async fn the_file_of_a_dead_process_is_claimed_and_removed_after_replay() {
    let dir = tempfile::tempdir().unwrap();
    let mut dead = UsageSpool::open(dir.path()).unwrap();
    dead.append(&(0..4).map(record).collect::<Vec<_>>()).unwrap();
    let dead_path = dead.path().to_owned();
    // Dropping the spool releases its lock like the death of its process does; the file stays.
    drop(dead);
    assert!(dead_path.exists());

    let mut next = UsageSpool::open(dir.path()).unwrap();
    assert!(!next.is_empty(), "the orphan is waiting for replay");
    let (seen, summary) = drain(&mut next, 10).await;
    assert_eq!(seen.len(), 4);
    assert_eq!(summary.records, 4);
    assert!(!dead_path.exists());
    drop(next);
    assert!(
        spool_files(dir.path()).is_empty(),
        "an empty spool leaves no file behind"
    );
}

#[tokio::test]
async fn a_file_that_cannot_be_read_is_kept_for_a_later_replay() {
    let dir = tempfile::tempdir().unwrap();
    let mut dead = UsageSpool::open(dir.path()).unwrap();
    dead.append(&(0..4).map(record).collect::<Vec<_>>()).unwrap();
    let dead_path = dead.path().to_owned();
    drop(dead);
    let mut next = UsageSpool::open(dir.path()).unwrap();
    next.append(&[record(9)]).unwrap();
    // The claimed file's handle can no longer be read (as after an I/O error of the disk).
    let claimed = next.orphans.first_mut().unwrap();
    claimed.file = OpenOptions::new().append(true).open(&dead_path).unwrap();
    let (seen, _) = drain(&mut next, 10).await;
    assert_eq!(seen, ["spool-req-9"], "the readable file was replayed");
    assert!(dead_path.exists(), "the unreadable file is kept");
    assert!(!next.is_empty(), "and replayed again later");
    next.orphans.first_mut().unwrap().file = OpenOptions::new()
        .read(true)
        .append(true)
        .open(&dead_path)
        .unwrap();
    let (seen, _) = drain(&mut next, 10).await;
    assert_eq!(seen.len(), 4);
    assert!(!dead_path.exists());
    assert!(next.is_empty());
}

#[tokio::test]
async fn the_file_of_a_live_process_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let mut live = UsageSpool::open(dir.path()).unwrap();
    live.append(&[record(1)]).unwrap();
    let mut other = UsageSpool::open(dir.path()).unwrap();
    assert!(other.is_empty());
    let (seen, _) = drain(&mut other, 10).await;
    assert!(seen.is_empty());
    assert!(live.path().exists());
    assert_eq!(live.own_records(), 1);
}

#[tokio::test]
async fn a_partial_last_line_is_skipped_and_the_rest_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let mut dead = UsageSpool::open(dir.path()).unwrap();
    dead.append(&(0..3).map(record).collect::<Vec<_>>()).unwrap();
    let path = dead.path().to_owned();
    drop(dead);
    // A crash in the middle of a write: half a record and no newline.
    let half = serde_json::to_string(&record(99)).unwrap();
    let mut file = OpenOptions::new().append(true).open(&path).unwrap();
    file.write_all(&half.as_bytes()[..half.len() / 2]).unwrap();
    drop(file);

    let mut next = UsageSpool::open(dir.path()).unwrap();
    let (seen, summary) = drain(&mut next, 10).await;
    assert_eq!(seen, ["spool-req-0", "spool-req-1", "spool-req-2"]);
    assert_eq!(summary.corrupt_lines, 1);
}

#[tokio::test]
async fn garbage_in_the_middle_is_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let mut dead = UsageSpool::open(dir.path()).unwrap();
    dead.append(&[record(0)]).unwrap();
    let path = dead.path().to_owned();
    drop(dead);
    let mut file = OpenOptions::new().append(true).open(&path).unwrap();
    file.write_all(b"{not json\n\xff\xfe\n").unwrap();
    let line = serde_json::to_string(&record(1)).unwrap();
    writeln!(file, "{line}").unwrap();
    drop(file);

    let mut next = UsageSpool::open(dir.path()).unwrap();
    let (seen, summary) = drain(&mut next, 10).await;
    assert_eq!(seen, ["spool-req-0", "spool-req-1"]);
    assert_eq!(summary.corrupt_lines, 2);
    // The lines that did not parse are set aside as they were, not deleted with their file.
    let rejected: Vec<PathBuf> = spool_files(dir.path())
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "rejected"))
        .collect();
    assert_eq!(rejected.len(), 1, "{:?}", spool_files(dir.path()));
    assert_eq!(std::fs::read(&rejected[0]).unwrap(), b"{not json\n\xff\xfe\n");
}

#[tokio::test]
async fn a_file_still_named_creating_is_replayed_when_it_holds_records() {
    // After a crash of the machine the rename of a spool file may be lost while the records synced
    // into it are not; an empty one is what a process that died before naming it leaves.
    let dir = tempfile::tempdir().unwrap();
    let mut dead = UsageSpool::open(dir.path()).unwrap();
    dead.append(&(0..3).map(record).collect::<Vec<_>>()).unwrap();
    let named = dead.path().to_owned();
    drop(dead);
    let unnamed = named.with_extension(CREATING_EXT);
    std::fs::rename(&named, &unnamed).unwrap();
    let empty = dir.path().join(format!("usage-1-1.{CREATING_EXT}"));
    std::fs::write(&empty, b"").unwrap();

    let mut next = UsageSpool::open(dir.path()).unwrap();
    assert!(!empty.exists(), "an empty abandoned file is removed");
    let (seen, _) = drain(&mut next, 10).await;
    assert_eq!(seen, ["spool-req-0", "spool-req-1", "spool-req-2"]);
    assert!(!unnamed.exists(), "removed once replayed");
}

#[tokio::test]
async fn set_aside_records_are_replayed_only_once_renamed_to_jsonl() {
    let dir = tempfile::tempdir().unwrap();
    let mut spool = UsageSpool::open(dir.path()).unwrap();
    let refused: Vec<UsageRecord> = (0..3).map(record).collect();
    let rejected = spool.set_aside(&refused[..2]).unwrap();
    assert_eq!(
        spool.set_aside(&refused[2..]).unwrap(),
        rejected,
        "one file per process"
    );
    assert_eq!(rejected.extension().unwrap(), "rejected");
    assert!(
        spool.is_empty(),
        "set-aside records are not replayed with the others"
    );
    drop(spool);

    // The owner is gone: a new process does not pick them up on its own.
    let mut next = UsageSpool::open(dir.path()).unwrap();
    assert!(next.is_empty());
    let (seen, _) = drain(&mut next, 10).await;
    assert!(seen.is_empty());
    drop(next);

    // Once the cause is fixed, the operator renames the file and the next start replays it.
    std::fs::rename(&rejected, rejected.with_extension("jsonl")).unwrap();
    let mut after = UsageSpool::open(dir.path()).unwrap();
    assert!(!after.is_empty());
    let (seen, summary) = drain(&mut after, 10).await;
    let expected: Vec<String> = refused.iter().map(|r| r.request_id.clone()).collect();
    assert_eq!(seen, expected);
    assert_eq!(summary.corrupt_lines, 0);
}
