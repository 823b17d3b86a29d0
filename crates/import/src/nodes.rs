//! Node groups: rows to node numbers through the id space (in memory, or sorted on disk
//! when the space outgrows the budget), labels, and the node tables.

use super::*;

/// Where a node group's in-memory id map gave out.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Resume {
    /// (file, line) of the first row whose id was not mapped.
    pub(crate) rows_at: (usize, u64),
    /// (file, line) past the batch whose bad rows were reported.
    pub(crate) errors_at: (usize, u64),
    /// The node the first unmapped row would have been.
    pub(crate) next_node: u64,
}

pub(crate) fn show_key(key: Key<'_>) -> String {
    match key {
        Key::Int(k) => k.to_string(),
        Key::Str(s) => String::from_utf8_lossy(s).to_string(),
    }
}

/// Labels of a batch's `:LABEL` column that are new to the database.
pub(crate) fn new_labels(
    batch: &Batch,
    label_column: Option<usize>,
    labels: &mut Vec<String>,
) -> Result<(), ImportError> {
    if let Some(lc) = label_column {
        let col = &batch.columns[lc];
        if let Some(child) = col.list_child_ref() {
            for k in 0..child.len() {
                let l = String::from_utf8_lossy(child.bytes_at(k));
                if !l.is_empty() && !labels.iter().any(|x| *x == l) {
                    label_index(labels, &l)?;
                }
            }
        }
    }
    Ok(())
}

/// A node group's rows from `o.rows_at` on, when the id space does not fit in memory:
/// 1. a read that sorts their ids with provisional node numbers into runs (the space's
///    in-memory map, if it had one, is written out first and freed);
/// 2. the merge with the space's ids, which finds the duplicates and makes the new
///    space file;
/// 3. a second read that hands the rows to `append`, without the duplicates (rejected
///    as bad rows with their file, line and text), reporting the bad rows past
///    `o.errors_at` and counting every record of the group.
#[allow(clippy::too_many_arguments)]
pub(crate) fn spill_nodes(
    ctx: &mut Ctx<'_>,
    group: &InputGroup,
    plan: &Plan,
    header_lines: u64,
    temp: &Path,
    space: &mut Space,
    si: usize,
    id_out: usize,
    o: Resume,
    counted: (u64, u64, u64),
    done_before: &mut u64,
    mut append: impl FnMut(&mut Ctx<'_>, &Batch) -> Result<(), ImportError>,
) -> Result<(), ImportError> {
    use crate::spill::{merge_nodes, RunWriter};
    rereadable(group)?;
    let name = format!("ids{si:04}");
    let integer = plan.integer_ids;
    let mut runs = Vec::new();
    if !space.map.is_empty() {
        // The map fills the budget: write it out in small runs, then free it.
        let mut w = RunWriter::new(&ctx.budget, temp, &format!("{name}-mem"), 0);
        space
            .map
            .for_each(&mut |k, node| k.with_sort_bytes(|k| w.push(k, node as u64)))?;
        space.map = IdMapWithGrant::new(integer, &ctx.budget);
        runs.extend(w.finish()?);
    }
    // 1. Sort the rest.
    let mut w = RunWriter::new(&ctx.budget, temp, &name, ctx.budget.limit_bytes() / 2);
    let mut next = o.next_node;
    reread(
        ctx,
        group,
        HeaderKind::Nodes,
        plan,
        None,
        header_lines,
        Report::QUIET,
        &mut 0,
        |_, w_, _, _, base, batch| {
            let col = &batch.columns[id_out];
            for r in 0..batch.n_rows() {
                if (w_.file_idx, base + batch.lines[r] as u64) < o.rows_at {
                    continue;
                }
                if next >= NODES_MAX {
                    return Err(ImportError::Usage(format!("more than {NODES_MAX} nodes")));
                }
                Key::of(col, r, integer).with_sort_bytes(|k| w.push(k, next))?;
                next += 1;
            }
            Ok(())
        },
    )?;
    runs.extend(w.finish()?);
    // 2. Merge.
    let merged = merge_nodes(runs, space.spilled.as_ref(), temp, &name, &ctx.budget)?;
    space.spilled = Some(merged.space);
    let dups = merged.duplicates;
    // 3. Read again, for the table.
    (ctx.rows_read, ctx.bytes_read, *done_before) = counted;
    let mut next = o.next_node;
    let mut di = 0;
    reread(
        ctx,
        group,
        HeaderKind::Nodes,
        plan,
        None,
        header_lines,
        Report {
            errors_from: Some(o.errors_at),
            count: true,
        },
        done_before,
        |ctx, w_, file, chunk_start, base, mut batch| {
            let n = batch.n_rows();
            let mut keep: Option<Vec<bool>> = None;
            for r in 0..n {
                let line = base + batch.lines[r] as u64;
                if (w_.file_idx, line) < o.rows_at {
                    keep.get_or_insert_with(|| vec![true; n])[r] = false;
                    continue;
                }
                let p = next;
                next += 1;
                while di < dups.len() && dups[di] < p {
                    di += 1;
                }
                if dups.get(di) == Some(&p) {
                    let key = Key::of(&batch.columns[id_out], r, integer);
                    let message = format!(
                        "duplicate node id '{}' (an earlier node has it)",
                        show_key(key)
                    );
                    let (s, e) = batch.spans[r];
                    let raw = &*w_.raw(chunk_start + s as usize, chunk_start + e as usize);
                    bad_row(ctx, file, line, 0, Reason::DuplicateId, &message, raw)?;
                    keep.get_or_insert_with(|| vec![true; n])[r] = false;
                }
            }
            if let Some(keep) = keep {
                batch.columns = batch.columns.iter().map(|c| c.filter(&keep)).collect();
            }
            append(ctx, &batch)
        },
    )
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn import_nodes(
    ctx: &mut Ctx<'_>,
    group: &InputGroup,
    gi: usize,
    staging: &Staging,
    spaces: &mut Vec<Space>,
    labels: &mut Vec<String>,
    first_node: u64,
    done_before: &mut u64,
    temp: &Path,
) -> Result<NodeTableMeta, ImportError> {
    let cfg = ctx.cfg;
    let (rx, recycle, handle) = start_reader(ctx, group);
    // Taken when the rows are to be read again (the id map spilled).
    let (mut rx_slot, mut handle_slot) = (Some(rx), Some(handle));
    let result = (|| {
        let rx = rx_slot
            .as_ref()
            .expect("the reader runs until the first pass ends");
        let (header, header_lines, plain) = read_header(rx, cfg, group, HeaderKind::Nodes)?;
        let integer = cfg.id_type == IdType::Integer;
        let (sniffed, mut first_window) = sniff(rx, cfg, group, &header, cfg.infer_types || plain)?;
        if plain {
            let text = header_text(&header, &sniffed);
            ctx.inferred_headers.push((group.files[0].clone(), text));
        }
        let inferred = &sniffed.types;
        // Plan: which output column each CSV column feeds.
        let mut slots = Vec::new();
        let mut columns: Vec<PropertyMeta> = Vec::new();
        let mut id_column = None;
        let mut id_space = None;
        let mut label_column = None;
        for (i, c) in header.columns.iter().enumerate() {
            let slot = match &c.role {
                Role::Id { space } => {
                    let name = if c.name.is_empty() {
                        "id".to_string()
                    } else {
                        c.name.clone()
                    };
                    let dtype = DataType::Scalar(if integer {
                        ScalarType::Long
                    } else {
                        ScalarType::String
                    });
                    columns.push(PropertyMeta { name, dtype });
                    id_column = Some(columns.len() - 1);
                    id_space = Some(space_index(
                        spaces,
                        space,
                        integer,
                        ctx.cfg.string_ids_as_strings,
                        &ctx.budget,
                    ));
                    Slot::Id {
                        out: columns.len() - 1,
                    }
                }
                Role::Label => {
                    columns.push(PropertyMeta {
                        name: ":LABEL".into(),
                        dtype: DataType::Array(ScalarType::String),
                    });
                    label_column = Some(columns.len() - 1);
                    Slot::Labels {
                        out: columns.len() - 1,
                    }
                }
                Role::Property => {
                    let dtype = inferred[i].unwrap_or(c.dtype);
                    columns.push(PropertyMeta {
                        name: c.name.clone(),
                        dtype,
                    });
                    Slot::Prop {
                        out: columns.len() - 1,
                        name: c.name.clone(),
                        date: sniffed.dates[i],
                    }
                }
                _ => Slot::Skip,
            };
            slots.push(slot);
        }
        if columns.iter().filter(|c| c.name == "id").count() > 1 {
            return Err(header_error(
                &group.files[0],
                quiver_csv::header::HeaderError {
                    column: 0,
                    message: "an unnamed :ID column is stored as property 'id', which the header also has; name the id column (e.g. userId:ID)".into(),
                },
            ));
        }
        let out_types: Vec<DataType> = columns.iter().map(|c| c.dtype).collect();
        let plan = Plan {
            slots,
            out_types: out_types.clone(),
            integer_ids: integer,
            dialect: cfg.dialect,
            null_markers: cfg.null_markers.clone().into(),
        };
        let mut fixed_labels = Vec::new();
        if let Some(spec) = &group.spec {
            for l in spec.split(':').filter(|l| !l.is_empty()) {
                fixed_labels.push(label_index(labels, l)?);
            }
        }
        let name = group.spec.clone().unwrap_or_else(|| format!("nodes{gi}"));
        let writer = TableWriter::create(staging, &format!("nodes-{gi:04}.seg"), columns.clone())?;
        let mut rg = RowGroup::new(&out_types, &ctx.budget, ctx.pool.clone(), writer);
        let mut n_rows = 0u64;
        let counted = (ctx.rows_read, ctx.bytes_read, *done_before);
        let spilled_before = id_space.is_some_and(|si| {
            spaces[si].spilled.is_some() || (cfg.spill_ids && ctx.base.is_none())
        });
        // Where the in-memory map gave out, if it did: rows from there on are resolved by
        // sorting (see `spill`).
        let mut resume: Option<Resume> = spilled_before.then_some(Resume {
            rows_at: (0, 0),
            errors_at: (0, 0),
            next_node: first_node,
        });
        if resume.is_none() {
            let r = drive_batches(
                ctx,
                &group.files,
                rx,
                &recycle,
                first_window.take(),
                &plan,
                None,
                header_lines,
                done_before,
                Report::ALL,
                |ctx, w, file, chunk_start, base, mut batch| {
                    // Ids: first occurrence wins; later ones are duplicates.
                    if let (Some(out), Some(si)) = (id_column, id_space) {
                        let mut keep: Option<Vec<bool>> = None;
                        let mut next_node = first_node + n_rows;
                        for r in 0..batch.n_rows() {
                            let key = Key::of(&batch.columns[out], r, integer);
                            if next_node >= NODES_MAX {
                                return Err(ImportError::Usage(format!(
                                    "more than {NODES_MAX} nodes"
                                )));
                            }
                            // An append: an id the database has already is a duplicate too.
                            let in_base = match (ctx.base, spaces[si].base) {
                                (Some(db), Some(b)) => db.lookup_id(b, key.into())?.is_some(),
                                _ => false,
                            };
                            let dup = in_base
                                || match spaces[si].map.insert(key, next_node as u32) {
                                    Ok(old) => old.is_some(),
                                    // The map is full: this row and the rest go the
                                    // sorting way (not in an append, whose ids must
                                    // also be looked up in the database's index).
                                    Err(ImportError::Budget { .. }) if ctx.base.is_none() => {
                                        resume = Some(Resume {
                                            rows_at: (w.file_idx, base + batch.lines[r] as u64),
                                            errors_at: (w.file_idx, base + batch.lines_total),
                                            next_node,
                                        });
                                        let k =
                                            keep.get_or_insert_with(|| vec![true; batch.n_rows()]);
                                        k[r..].iter_mut().for_each(|x| *x = false);
                                        break;
                                    }
                                    Err(e) => return Err(e),
                                };
                            if dup {
                                let shown = show_key(key);
                                let (s, e) = batch.spans[r];
                                let raw =
                                    &*w.raw(chunk_start + s as usize, chunk_start + e as usize);
                                let message = if in_base {
                                    format!(
                                        "duplicate node id '{shown}' (a node in the database has it)"
                                    )
                                } else {
                                    format!("duplicate node id '{shown}' (an earlier node has it)")
                                };
                                let line = base + batch.lines[r] as u64;
                                bad_row(ctx, file, line, 0, Reason::DuplicateId, &message, raw)?;
                                keep.get_or_insert_with(|| vec![true; batch.n_rows()])[r] = false;
                            } else {
                                next_node += 1;
                            }
                        }
                        if let Some(keep) = keep {
                            batch.columns = batch.columns.iter().map(|c| c.filter(&keep)).collect();
                        }
                    }
                    new_labels(&batch, label_column, labels)?;
                    let kept = batch.columns.first().map_or(batch.n_rows(), |c| c.len());
                    rg.append(&batch.columns, &mut ctx.row_groups)?;
                    n_rows += kept as u64;
                    if resume.is_some() {
                        // Stops this read; the rows from `resume` on are read again.
                        return Err(ImportError::Interrupted);
                    }
                    Ok(())
                },
            );
            if resume.is_none() {
                r?;
            }
        }
        if let (Some(o), Some(out), Some(si)) = (resume, id_column, id_space) {
            drop(rx_slot.take());
            if let Some(h) = handle_slot.take() {
                let _ = h.join();
            }
            spill_nodes(
                ctx,
                group,
                &plan,
                header_lines,
                temp,
                &mut spaces[si],
                si,
                out,
                o,
                counted,
                done_before,
                |ctx, batch| {
                    new_labels(batch, label_column, labels)?;
                    let kept = batch.columns.first().map_or(0, |c| c.len());
                    rg.append(&batch.columns, &mut ctx.row_groups)?;
                    n_rows += kept as u64;
                    Ok(())
                },
            )?;
        }
        let segment: SegmentMeta = rg.finish(&mut ctx.row_groups)?;
        Ok(NodeTableMeta {
            name,
            first_node,
            n_rows,
            labels: fixed_labels,
            label_column,
            id_column,
            id_space,
            columns,
            segments: vec![segment],
            patches: Vec::new(),
            deleted: None,
        })
    })();
    drop(rx_slot);
    if let Some(h) = handle_slot {
        let _ = h.join();
    }
    result
}
