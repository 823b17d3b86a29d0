//! Reading a group: the reader thread on its files, the parse stage that turns windows
//! into typed batches on the pool, and the batch loop that hands each batch on in file
//! order with its bad rows reported; reading a group a second time (the sorting path).

use super::*;

/// Starts the reader thread of a group.
pub(crate) fn start_reader(
    ctx: &Ctx<'_>,
    group: &InputGroup,
) -> (
    crossbeam_channel::Receiver<Msg>,
    crossbeam_channel::Sender<Vec<u8>>,
    std::thread::JoinHandle<()>,
) {
    spawn_reader(
        group.files.clone(),
        group.source.clone(),
        ctx.cfg.dialect,
        ctx.window_bytes,
        ctx.chunk_bytes,
        true,
        ctx.cancel.clone(),
        ctx.pool.clone(),
    )
}

/// Runs the parse stage over a group's windows and hands each parsed batch, in file
/// order, to `on_batch` (with the window, its file, the chunk's offset in the window and
/// the line the chunk starts on), after counting its rows and handling its bad rows.
/// Keeps the byte progress and line numbers across files, and recycles window buffers.
#[allow(clippy::too_many_arguments)]
pub(crate) fn drive_batches(
    ctx: &mut Ctx<'_>,
    files: &[PathBuf],
    rx: &crossbeam_channel::Receiver<Msg>,
    recycle: &crossbeam_channel::Sender<Vec<u8>>,
    first: Option<Window>,
    plan: &Plan,
    endpoints: Option<&Endpoints<'_>>,
    header_lines: u64,
    done_before: &mut u64,
    report: Report,
    mut on_batch: impl FnMut(&mut Ctx<'_>, &Window, &Path, usize, u64, Batch) -> Result<(), ImportError>,
) -> Result<(), ImportError> {
    let mut lines = Lines {
        file_idx: 0,
        next_line: header_lines,
    };
    let (mut last_done, mut file_done_base) = (0u64, 0u64);
    let pool = ctx.pool.clone();
    std::thread::scope(|scope| -> Result<(), ImportError> {
        let parsed = parse_stage(scope, rx, first, plan, endpoints, pool);
        for p in parsed.iter() {
            if ctx.cancel.load(std::sync::atomic::Ordering::Relaxed) {
                return Err(ImportError::Interrupted);
            }
            let (w, batches) = match p {
                Parsed::Window(w, b) => (w, b),
                Parsed::Error(e) => return Err(e),
            };
            if w.first_of_file && w.file_idx > 0 {
                file_done_base += last_done;
                last_done = 0;
            }
            lines.window(&w, header_lines);
            let file = &files[w.file_idx];
            for (chunk_start, mut batch) in batches {
                let base = lines.next_line;
                if report.count {
                    ctx.rows_read += batch.records;
                }
                for e in std::mem::take(&mut batch.errors) {
                    let at = (w.file_idx, base + e.line as u64);
                    if report.errors_from.is_none_or(|from| at < from) {
                        continue;
                    }
                    let (s, t) = (e.span.0 as usize, e.span.1 as usize);
                    let raw = &*w.raw(chunk_start + s, chunk_start + t);
                    bad_row(
                        ctx,
                        file,
                        base + e.line as u64,
                        e.column as u64,
                        e.reason,
                        &e.message(plan, raw),
                        raw,
                    )?;
                }
                let lines_total = batch.lines_total;
                on_batch(ctx, &w, file, chunk_start, base, batch)?;
                lines.next_line = base + lines_total;
            }
            if report.count {
                ctx.bytes_read += w.file_bytes_done - last_done;
                ctx.progress
                    .advance(*done_before + file_done_base + last_done, ctx.rows_read);
            }
            last_done = w.file_bytes_done;
            // Hand the window's buffer back to the reader: no fresh pages per window.
            let _ = recycle.try_send(w.data);
        }
        Ok(())
    })?;
    if report.count {
        *done_before += file_done_base + last_done;
    }
    Ok(())
}

/// What a read of a group reports: the bad rows from a place on (none: a read that
/// only collects ids for sorting), and whether its records count.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Report {
    pub(crate) errors_from: Option<(usize, u64)>,
    pub(crate) count: bool,
}

impl Report {
    pub(crate) const ALL: Report = Report {
        errors_from: Some((0, 0)),
        count: true,
    };
    pub(crate) const QUIET: Report = Report {
        errors_from: None,
        count: false,
    };
}

/// Every input of `group` is a regular file, so that sorting ids on disk can read it a
/// second time.
pub(crate) fn rereadable(group: &InputGroup) -> Result<(), ImportError> {
    if let Some(s) = &group.source {
        return match s.reopenable() {
            true => Ok(()),
            false => Err(ImportError::Usage(format!(
                "{}: the node ids do not fit in the memory budget and are sorted on disk, which reads the input a second time, and this stream can be read once; pass a table or a file, or raise the memory budget",
                group.files[0].display()
            ))),
        };
    }
    for f in &group.files {
        if !std::fs::metadata(f).is_ok_and(|m| m.is_file()) {
            return Err(ImportError::Usage(format!(
                "{}: the node ids do not fit in --memory-budget and are sorted on disk, which reads the file a second time, and it is a pipe or device; import from a file, or raise --memory-budget",
                f.display()
            )));
        }
    }
    Ok(())
}

/// Starts a reader on `group`, skips its header and runs `f` on it; stops the reader.
pub(crate) fn with_reader<T>(
    ctx: &mut Ctx<'_>,
    group: &InputGroup,
    kind: HeaderKind,
    f: impl FnOnce(
        &mut Ctx<'_>,
        &crossbeam_channel::Receiver<Msg>,
        &crossbeam_channel::Sender<Vec<u8>>,
    ) -> Result<T, ImportError>,
) -> Result<T, ImportError> {
    let (rx, recycle, handle) = start_reader(ctx, group);
    let r = read_header(&rx, ctx.cfg, group, kind).and_then(|_| f(ctx, &rx, &recycle));
    drop(rx);
    let _ = handle.join();
    r
}

/// Reads `group` again from the start (a read of the sorting path), batch by batch.
#[allow(clippy::too_many_arguments)]
pub(crate) fn reread(
    ctx: &mut Ctx<'_>,
    group: &InputGroup,
    kind: HeaderKind,
    plan: &Plan,
    endpoints: Option<&Endpoints<'_>>,
    header_lines: u64,
    report: Report,
    done_before: &mut u64,
    on_batch: impl FnMut(&mut Ctx<'_>, &Window, &Path, usize, u64, Batch) -> Result<(), ImportError>,
) -> Result<(), ImportError> {
    with_reader(ctx, group, kind, |ctx, rx, recycle| {
        drive_batches(
            ctx,
            &group.files,
            rx,
            recycle,
            None,
            plan,
            endpoints,
            header_lines,
            done_before,
            report,
            on_batch,
        )
    })
}

/// A window with its chunks parsed.
pub(crate) enum Parsed {
    Window(Window, Vec<(usize, Batch)>),
    Error(ImportError),
}

/// Runs parsing on a thread of its own (its chunks in parallel on the pool), so that the
/// sequential stage of one window overlaps the parsing of the next. The channel holds
/// one parsed window: memory in flight stays a few windows.
pub(crate) fn parse_stage<'scope, 'env>(
    scope: &'scope std::thread::Scope<'scope, 'env>,
    rx: &'env crossbeam_channel::Receiver<Msg>,
    first: Option<Window>,
    plan: &'env Plan,
    endpoints: Option<&'env Endpoints<'env>>,
    pool: Arc<rayon::ThreadPool>,
) -> crossbeam_channel::Receiver<Parsed> {
    let (tx, out) = crossbeam_channel::bounded::<Parsed>(1);
    scope.spawn(move || {
        let windows = first.into_iter().map(Msg::Window).chain(rx.iter());
        for msg in windows {
            let p = match msg {
                Msg::Window(w) => {
                    let batches = pool.install(|| parse_window(&w, plan, endpoints));
                    Parsed::Window(w, batches)
                }
                Msg::Error(e) => Parsed::Error(e.into()),
                Msg::Header { .. } => continue,
            };
            if tx.send(p).is_err() {
                return;
            }
        }
    });
    out
}

/// Parses the chunks of a window in parallel.
pub(crate) fn parse_window(
    w: &Window,
    plan: &Plan,
    endpoints: Option<&Endpoints<'_>>,
) -> Vec<(usize, Batch)> {
    let mut ranges = Vec::with_capacity(w.chunk_ends.len());
    let mut s = 0;
    for &e in &w.chunk_ends {
        ranges.push((s, e));
        s = e;
    }
    ranges
        .par_iter()
        .map(|&(s, e)| {
            let batch = match &w.typed {
                Some(rows) => parse_typed(rows.as_ref(), s, e, plan, endpoints),
                None => parse_chunk(&w.data[s..e], plan, endpoints),
            };
            (s, batch)
        })
        .collect()
}

/// Tracks the line where the next chunk starts, per file.
pub(crate) struct Lines {
    pub(crate) file_idx: usize,
    pub(crate) next_line: u64,
}

impl Lines {
    pub(crate) fn window(&mut self, w: &Window, header_lines: u64) {
        if w.first_of_file {
            self.file_idx = w.file_idx;
            self.next_line = if w.file_idx == 0 { header_lines } else { 0 };
        }
    }
}
