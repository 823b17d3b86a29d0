//! Relationship groups: each row's endpoints resolved to node numbers, properties into
//! the relationship tables, the edges into the edge store that becomes CSR.

use super::*;

#[allow(clippy::too_many_arguments)]
pub(crate) fn import_rels(
    ctx: &mut Ctx<'_>,
    group: &InputGroup,
    staging: &Staging,
    temp: &Path,
    spaces: &[Space],
    rels: &mut Vec<RelState>,
    (n_nodes, shift): (u64, u32),
    done_before: &mut u64,
) -> Result<(), ImportError> {
    let cfg = ctx.cfg;
    let (rx, recycle, handle) = start_reader(ctx, group);
    // Taken when the endpoints are resolved by sorting (the rows are read twice).
    let (mut rx_slot, mut handle_slot) = (Some(rx), Some(handle));
    let result = (|| {
        let file0 = &group.files[0];
        let rx0 = rx_slot
            .as_ref()
            .expect("the reader runs until the header is read");
        let (header, header_lines, plain) =
            read_header(rx0, cfg, group, HeaderKind::Relationships)?;
        let (sniffed, mut first_window) =
            sniff(rx0, cfg, group, &header, cfg.infer_types || plain)?;
        if plain {
            let text = header_text(&header, &sniffed);
            ctx.inferred_headers.push((file0.clone(), text));
        }
        let find_space = |space: &Option<String>, what: &str| -> Result<usize, ImportError> {
            spaces.iter().position(|s| &s.name == space).ok_or_else(|| {
                ImportError::Usage(format!(
                    "{}: {what} refers to id space {}, but no nodes file declares it (:ID{})",
                    file0.display(),
                    space
                        .as_deref()
                        .map_or("(global)".to_string(), |s| format!("'{s}'")),
                    space.as_deref().map_or(String::new(), |s| format!("({s})"))
                ))
            })
        };
        let mut slots = Vec::new();
        let mut columns: Vec<PropertyMeta> = Vec::new();
        let (mut ss, mut es) = (0, 0);
        let mut has_type_col = false;
        for ((c, inferred), &date) in header
            .columns
            .iter()
            .zip(&sniffed.types)
            .zip(&sniffed.dates)
        {
            slots.push(match &c.role {
                Role::StartId { space } => {
                    ss = find_space(space, ":START_ID")?;
                    Slot::Start
                }
                Role::EndId { space } => {
                    es = find_space(space, ":END_ID")?;
                    Slot::End
                }
                Role::Type => {
                    has_type_col = true;
                    Slot::Type
                }
                Role::Property if !cfg.no_edge_properties => {
                    columns.push(PropertyMeta {
                        name: c.name.clone(),
                        dtype: inferred.unwrap_or(c.dtype),
                    });
                    Slot::Prop {
                        out: columns.len() - 1,
                        name: c.name.clone(),
                        date,
                    }
                }
                _ => Slot::Skip,
            });
        }
        if group.spec.is_none() && !has_type_col {
            return Err(ImportError::Usage(format!(
                "{}: relationships need a type: give it on the command line (--relationships TYPE={}) or add a :TYPE column",
                file0.display(),
                file0.display()
            )));
        }
        let out_types: Vec<DataType> = columns.iter().map(|c| c.dtype).collect();
        let integer = cfg.id_type == IdType::Integer;
        let plan = Plan {
            slots,
            out_types: out_types.clone(),
            integer_ids: integer,
            dialect: cfg.dialect,
            null_markers: cfg.null_markers.clone().into(),
        };
        let endpoints = Endpoints {
            start: &spaces[ss].map,
            end: &spaces[es].map,
            start_integer: integer,
            end_integer: integer,
            start_base: ctx.base.zip(spaces[ss].base),
            end_base: ctx.base.zip(spaces[es].base),
            start_spilled: spaces[ss].spilled.is_some(),
            end_spilled: spaces[es].spilled.is_some(),
            keep_keys: false,
            shift,
        };
        // Endpoints in spilled spaces: sort their keys with the row ordinal, join them
        // with the space files, then read the rows again with the nodes found.
        let mut resolved = if endpoints.start_spilled || endpoints.end_spilled {
            // The rows are read again from the start: the sniffed window is not used.
            first_window = None;
            drop(rx_slot.take());
            if let Some(h) = handle_slot.take() {
                let _ = h.join();
            }
            Some(resolve_endpoints(
                ctx,
                group,
                &plan,
                &endpoints,
                header_lines,
                temp,
                (&spaces[ss], &spaces[es]),
            )?)
        } else {
            None
        };
        let start_col = plan.slots.iter().position(|s| matches!(s, Slot::Start));
        let end_col = plan.slots.iter().position(|s| matches!(s, Slot::End));
        let mut ordinal = 0u64;
        let type_index = |name: &str,
                          rels: &mut Vec<RelState>,
                          ctx: &mut Ctx<'_>|
         -> Result<usize, ImportError> {
            if let Some(i) = rels.iter().position(|r| r.name == name) {
                if rels[i].columns != columns {
                    return Err(ImportError::Usage(format!(
                        "{}: relationship type {name} was imported before with other properties; one type has one property schema",
                        file0.display()
                    )));
                }
                return Ok(i);
            }
            let ri = rels.len();
            let props = if columns.is_empty() {
                None
            } else {
                Some((
                    TableWriter::create(
                        staging,
                        &format!("rel-{ri:04}.props.seg"),
                        columns.clone(),
                    )?,
                    out_types.iter().map(|&t| ColumnBuilder::new(t)).collect(),
                ))
            };
            rels.push(RelState {
                name: name.to_string(),
                store: EdgeStore::new(n_nodes, &ctx.budget, temp, name),
                columns: columns.clone(),
                props,
                start_space: ss,
                end_space: es,
            });
            Ok(ri)
        };
        let fixed_type = match &group.spec {
            Some(t) if !has_type_col => Some(type_index(t, rels, ctx)?),
            _ => None,
        };
        let mut rg_grant = ctx.budget.empty_grant("relationship property buffer");
        let by_ordinal = resolved.is_some();
        let mut main_pass =
            |ctx: &mut Ctx<'_>,
             rx: &crossbeam_channel::Receiver<Msg>,
             recycle: &crossbeam_channel::Sender<Vec<u8>>| {
                drive_batches(
                    ctx,
                    &group.files,
                    rx,
                    recycle,
                    first_window.take(),
                    &plan,
                    Some(&endpoints),
                    header_lines,
                    done_before,
                    Report::ALL,
                    |ctx, w, file, chunk_start, base, mut batch| {
                        if let Some((start, end)) = resolved.as_mut() {
                            // Rows whose endpoints the join did not find are rejected now.
                            let n = batch.edges.len();
                            let mut keep: Option<Vec<bool>> = None;
                            for r in 0..n {
                                let ord = ordinal;
                                ordinal += 1;
                                let mut e = batch.edges[r];
                                let mut missing = None;
                                if let Some(s) = start.as_mut() {
                                    match s.get(ord)? {
                                        Some(node) => e = (node as u64) << 32 | (e & 0xffff_ffff),
                                        None => missing = start_col,
                                    }
                                }
                                if let (None, Some(d)) = (missing, end.as_mut()) {
                                    match d.get(ord)? {
                                        Some(node) => e = (e & !0xffff_ffff) | node as u64,
                                        None => missing = end_col,
                                    }
                                }
                                batch.edges[r] = e;
                                if let Some(col) = missing {
                                    let (s, t) = batch.spans[r];
                                    let raw =
                                        &*w.raw(chunk_start + s as usize, chunk_start + t as usize);
                                    let err = parse::RowError {
                                        line: batch.lines[r],
                                        column: parse::field_column(&plan, raw, col),
                                        reason: Reason::MissingNode,
                                        detail: parse::Detail::Field(col as u32),
                                        span: (s, t),
                                    };
                                    bad_row(
                                        ctx,
                                        file,
                                        base + err.line as u64,
                                        err.column as u64,
                                        err.reason,
                                        &err.message(&plan, raw),
                                        raw,
                                    )?;
                                    keep.get_or_insert_with(|| vec![true; n])[r] = false;
                                }
                            }
                            if let Some(keep) = keep {
                                let mut it = keep.iter();
                                batch.edges.retain(|_| *it.next().unwrap_or(&true));
                                if !batch.types.is_empty() {
                                    let mut it = keep.iter();
                                    batch.types.retain(|_| *it.next().unwrap_or(&true));
                                }
                                batch.columns =
                                    batch.columns.iter().map(|c| c.filter(&keep)).collect();
                            }
                        }
                        // Global type index of every row.
                        // Global type of every row, when the file has a :TYPE column.
                        let row_types: Vec<usize> = match fixed_type {
                            Some(_) => Vec::new(),
                            None => {
                                let mut map = Vec::with_capacity(batch.type_names.len());
                                for n in &batch.type_names {
                                    let name = String::from_utf8_lossy(n).to_string();
                                    map.push(type_index(&name, rels, ctx)?);
                                }
                                batch.types.iter().map(|&t| map[t as usize]).collect()
                            }
                        };
                        match fixed_type {
                            Some(t) => rels[t].store.push_all(&batch.edges)?,
                            None => {
                                for (r, &e) in batch.edges.iter().enumerate() {
                                    rels[row_types[r]]
                                        .store
                                        .push_all(std::slice::from_ref(&e))?;
                                }
                            }
                        }
                        if !columns.is_empty() {
                            let (single, targets) = match fixed_type {
                                Some(t) => (Some(t), vec![t]),
                                None => {
                                    let single = row_types
                                        .first()
                                        .copied()
                                        .filter(|&t| row_types.iter().all(|&x| x == t));
                                    let mut targets: Vec<usize> = row_types.clone();
                                    targets.sort_unstable();
                                    targets.dedup();
                                    (single, targets)
                                }
                            };
                            for t in targets {
                                let cols: Vec<ColumnBuilder> = if single.is_some() {
                                    Vec::new()
                                } else {
                                    let keep: Vec<bool> =
                                        row_types.iter().map(|&x| x == t).collect();
                                    batch.columns.iter().map(|c| c.filter(&keep)).collect()
                                };
                                let src = if single.is_some() {
                                    &batch.columns
                                } else {
                                    &cols
                                };
                                let Some((writer, builders)) = rels[t].props.as_mut() else {
                                    continue;
                                };
                                if builders[0].len() + src[0].len() > ROW_GROUP_ROWS_MAX {
                                    ctx.pool.install(|| writer.write_row_group(builders))?;
                                    ctx.row_groups += 1;
                                    builders.iter_mut().for_each(|b| b.clear());
                                }
                                for (b, c) in builders.iter_mut().zip(src) {
                                    b.append(c);
                                }
                            }
                            // The property buffers of all types share one grant and the same cap
                            // as node row groups; under pressure every type flushes.
                            let held = |rels: &Vec<RelState>| -> u64 {
                                rels.iter()
                                    .filter_map(|r| r.props.as_ref())
                                    .map(|(_, b)| {
                                        b.iter().map(|c| c.heap_bytes() as u64).sum::<u64>()
                                    })
                                    .sum::<u64>()
                                    * 3
                                    / 2
                            };
                            let need = held(rels);
                            let cap = row_group_cap(&ctx.budget);
                            if need > rg_grant.bytes()
                                && (need > cap || rg_grant.try_resize(need).is_err())
                            {
                                for r in rels.iter_mut() {
                                    if let Some((writer, builders)) = r.props.as_mut() {
                                        if builders[0].len() > 0 {
                                            ctx.pool
                                                .install(|| writer.write_row_group(builders))?;
                                            ctx.row_groups += 1;
                                        }
                                        *builders = out_types
                                            .iter()
                                            .map(|&t| ColumnBuilder::new(t))
                                            .collect();
                                    }
                                }
                                rg_grant.try_resize(held(rels))?;
                            }
                        }
                        Ok(())
                    },
                )
            };
        // The read after a join holds a quarter of the budget back from the edge
        // store. Measured on 100M relationships at 256 MiB: without it, resident memory
        // rose by about 20 MiB with each spill of the edge store (freed blocks the
        // allocator keeps, among the per-chunk span and line arrays this read adds),
        // to 384 MiB, past the budget plus the 64 MiB fixed overhead.
        let _headroom = by_ordinal.then(|| {
            ctx.budget
                .try_grant(ctx.budget.limit_bytes() / 4, "spilled endpoints headroom")
                .ok()
        });
        match rx_slot.as_ref() {
            Some(rx) => main_pass(ctx, rx, &recycle)?,
            None => with_reader(ctx, group, HeaderKind::Relationships, |ctx, rx, recycle| {
                main_pass(ctx, rx, recycle)
            })?,
        }
        Ok(())
    })();
    drop(rx_slot);
    if let Some(h) = handle_slot {
        let _ = h.join();
    }
    result
}

/// Resolves the endpoints of `group` on its spilled sides: a read that writes each
/// good row's keys with the row's ordinal into sorted runs, then a join of each side's
/// runs with its space file. The result gives the node of each ordinal, side by side.
pub(crate) fn resolve_endpoints(
    ctx: &mut Ctx<'_>,
    group: &InputGroup,
    plan: &Plan,
    endpoints: &Endpoints<'_>,
    header_lines: u64,
    temp: &Path,
    spaces: (&Space, &Space),
) -> Result<(Option<spill::Resolved>, Option<spill::Resolved>), ImportError> {
    use crate::spill::{Resolved, RunWriter};
    rereadable(group)?;
    let share = ctx.budget.limit_bytes() / 4;
    let mut start = endpoints
        .start_spilled
        .then(|| RunWriter::new(&ctx.budget, temp, "start", share));
    let mut end = endpoints
        .end_spilled
        .then(|| RunWriter::new(&ctx.budget, temp, "end", share));
    let mut rows = 0u64;
    reread(
        ctx,
        group,
        HeaderKind::Relationships,
        plan,
        Some(&Endpoints {
            keep_keys: true,
            ..*endpoints
        }),
        header_lines,
        Report::QUIET,
        &mut 0,
        |_, _, _, _, _, batch| {
            for r in 0..batch.edges.len() {
                if let Some(w) = start.as_mut() {
                    w.push(batch.start_keys.get(r), rows)?;
                }
                if let Some(w) = end.as_mut() {
                    w.push(batch.end_keys.get(r), rows)?;
                }
                rows += 1;
            }
            Ok(())
        },
    )?;
    let join = |w: Option<RunWriter>, space: &Space, name: &str| -> Result<_, ImportError> {
        let Some(w) = w else { return Ok(None) };
        let runs = w.finish()?;
        let file = space
            .spilled
            .as_ref()
            .expect("a spilled side's space has its file");
        Ok(Some(Resolved::join(
            runs,
            file,
            rows,
            temp,
            name,
            &ctx.budget,
        )?))
    };
    let s = join(start.take(), spaces.0, "start")?;
    let e = join(end.take(), spaces.1, "end")?;
    Ok((s, e))
}
