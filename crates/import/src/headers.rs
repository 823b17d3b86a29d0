//! A group's header, read once from its first file, and the types of its columns:
//! given by annotations, or sniffed from a sample of rows when the header has none
//! (`SNIFF_ROWS`); also the questions front ends ask of the headers before an import
//! (integer ids, `describe`).

use super::*;

pub(crate) fn header_error(file: &Path, e: quiver_csv::header::HeaderError) -> ImportError {
    ImportError::Header {
        file: file.to_path_buf(),
        column: e.column,
        message: e.message,
    }
}

/// Receives the header message of a group.
pub(crate) fn receive_header(
    rx: &crossbeam_channel::Receiver<Msg>,
    first_file: &Path,
) -> Result<(Vec<Vec<u8>>, u64), ImportError> {
    match rx.recv() {
        Ok(Msg::Header { fields, lines }) => Ok((fields, lines)),
        Ok(Msg::Error(e)) => Err(e.into()),
        Ok(Msg::Window(_)) | Err(_) => Err(ImportError::Input {
            file: first_file.to_path_buf(),
            line: 0,
            column: 0,
            message: "the file is empty; expected a header line".into(),
        }),
    }
}

/// Receives and parses the header of a group; returns it, the lines it spans, and
/// whether it had no annotation at all (then it is read by
/// [`quiver_csv::header::annotate_plain`]'s rules and its types are sniffed).
pub(crate) fn read_header(
    rx: &crossbeam_channel::Receiver<Msg>,
    cfg: &ImportConfig,
    group: &InputGroup,
    kind: HeaderKind,
) -> Result<(Header, u64, bool), ImportError> {
    let file0 = &group.files[0];
    let (fields, lines) = receive_header(rx, file0)?;
    let refs: Vec<&[u8]> = fields.iter().map(|f| f.as_slice()).collect();
    let (header, plain) = header_of(&refs, cfg, group, kind)?;
    Ok((header, lines, plain))
}

/// A group's header from its first record's fields (see [`read_header`]).
pub(crate) fn header_of(
    refs: &[&[u8]],
    cfg: &ImportConfig,
    group: &InputGroup,
    kind: HeaderKind,
) -> Result<(Header, bool), ImportError> {
    let file0 = &group.files[0];
    // The group's first label (nodes) or its type, and the columns named for it.
    let name = group
        .spec
        .as_deref()
        .and_then(|s| s.split(':').next())
        .map(str::trim);
    fn chosen<'c>(list: &'c [(String, String)], name: Option<&str>) -> Option<&'c str> {
        list.iter()
            .find(|(l, _)| Some(l.as_str()) == name)
            .map(|(_, c)| c.as_str())
    }
    let nodes = kind == HeaderKind::Nodes;
    let rules = quiver_csv::header::PlainRules {
        label: group.spec.as_deref(),
        need_id: !nodes || !cfg.relationships.is_empty(),
        id: chosen(&cfg.id_columns, name).filter(|_| nodes),
        start: chosen(&cfg.start_columns, name).filter(|_| !nodes),
        end: chosen(&cfg.end_columns, name).filter(|_| !nodes),
    };
    let plain = quiver_csv::header::annotate_plain(refs, kind, &rules)
        .map_err(|e| header_error(file0, e))?;
    if plain.is_none() && (rules.id.is_some() || rules.start.is_some() || rules.end.is_some()) {
        return Err(ImportError::Usage(format!(
            "{}: --id-column, --start-column and --end-column choose columns of headers without annotations; this header is annotated (mark the column :ID, :START_ID or :END_ID in it instead)",
            file0.display()
        )));
    }
    let header = match &plain {
        Some(p) => {
            let refs: Vec<&[u8]> = p.iter().map(|f| f.as_bytes()).collect();
            Header::parse(&refs, kind)
        }
        None => Header::parse(refs, kind),
    }
    .map_err(|e| header_error(file0, e))?;
    Ok((header, plain.is_some()))
}

/// Whether every group is a [`RecordSource`] whose id and endpoint columns are
/// integers by their schema (an Arrow or Parquet input with integer ids): then the
/// import is best run with integer ids (`--id-type integer`), so that `{id: 1}` finds
/// the node the frame's `1` made. A CSV group, or a string id column, says no.
pub fn sources_have_integer_ids(cfg: &ImportConfig) -> Result<bool, ImportError> {
    let mut any = false;
    for (group, kind) in cfg.groups() {
        let Some(src) = &group.source else {
            return Ok(false);
        };
        let names = src.column_names();
        let refs: Vec<&[u8]> = names.iter().map(|n| n.as_bytes()).collect();
        let (header, _) = header_of(&refs, cfg, group, kind)?;
        let types = src.column_types();
        for (i, c) in header.columns.iter().enumerate() {
            if matches!(
                c.role,
                Role::Id { .. } | Role::StartId { .. } | Role::EndId { .. }
            ) {
                any = true;
                if types.get(i).copied().flatten() != Some(DataType::Scalar(ScalarType::Long)) {
                    return Ok(false);
                }
            }
        }
    }
    Ok(any)
}

/// What an import would read each group's header as, without importing (`--dry-run`):
/// per group, its first file, the header in Neo4j's convention (with the types sniffed
/// for a plain header, or with `--infer-types`), and whether it was plain.
pub fn describe(cfg: &ImportConfig) -> Result<Vec<(PathBuf, String, bool)>, ImportError> {
    let mut out = Vec::new();
    for_each_sample(cfg, |group, header, plain, sniffed, _| {
        out.push((group.files[0].clone(), header_text(header, sniffed), plain));
        Ok(true)
    })?;
    Ok(out)
}

/// Calls `f` with each group's header, whether it was plain, the sniffed types and the
/// sampled data (its first window, when types are sniffed), reading no further; stops
/// when `f` answers false.
pub(crate) fn for_each_sample(
    cfg: &ImportConfig,
    mut f: impl FnMut(&InputGroup, &Header, bool, &Sniffed, Option<&[u8]>) -> Result<bool, ImportError>,
) -> Result<(), ImportError> {
    let pool = Arc::new(
        rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .map_err(|e| ImportError::Usage(format!("cannot start a thread: {e}")))?,
    );
    for (group, kind) in cfg.groups() {
        // Its own cancel flag: set to stop the reader once the sample is read.
        let stop = Arc::new(AtomicBool::new(false));
        let (rx, _recycle, handle) = spawn_reader(
            group.files.clone(),
            group.source.clone(),
            cfg.dialect,
            1 << 20,
            1 << 20,
            true,
            stop.clone(),
            pool.clone(),
        );
        let r = read_header(&rx, cfg, group, kind).and_then(|(header, _, plain)| {
            let (types, window) = sniff(&rx, cfg, group, &header, cfg.infer_types || plain)?;
            f(
                group,
                &header,
                plain,
                &types,
                window.as_ref().map(|w| w.data.as_slice()),
            )
        });
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        drop(rx);
        let _ = handle.join();
        if !r? {
            break;
        }
    }
    Ok(())
}

/// Whether every header is plain (no annotations) and every id, start and end column
/// holds only integers in canonical form in its sample: such files get integer ids
/// when `--id-type` is not given, so that `{id: 1}` finds the node a newcomer's `1`
/// made. Headers in Neo4j's convention keep its rule (string ids).
pub fn plain_ids_are_integers(cfg: &ImportConfig) -> Result<bool, ImportError> {
    // A pipe cannot be read twice: its sample would be taken from the import.
    let regular = |f: &PathBuf| std::fs::metadata(f).is_ok_and(|m| m.is_file());
    if cfg
        .groups()
        .any(|(g, _)| g.source.is_some() || !g.files.iter().all(regular))
    {
        return Ok(false);
    }
    let mut all = true;
    let mut any = false;
    // A file that cannot be read or parsed says nothing here: the import reports it.
    let _ = for_each_sample(cfg, |_, header, plain, _, data| {
        let Some(data) = data.filter(|_| plain) else {
            all = false;
            return Ok(false);
        };
        let ids: Vec<usize> = (0..header.columns.len())
            .filter(|&i| {
                matches!(
                    header.columns[i].role,
                    Role::Id { .. } | Role::StartId { .. } | Role::EndId { .. }
                )
            })
            .collect();
        any |= !ids.is_empty();
        let mut tok = quiver_csv::tokenize::Tokenizer::new(data, &cfg.dialect);
        let mut fields = quiver_csv::tokenize::Fields::default();
        let mut rows = 0;
        while let Ok(Some(_)) = tok.next_record(&mut fields) {
            if fields.len() != header.columns.len() {
                continue;
            }
            for &i in &ids {
                let v = fields.get(data, i);
                let leading_zero = v.len() > 1 && v[0] == b'0';
                if v.is_empty() || leading_zero || crate::idmap::canonical_int(v).is_none() {
                    all = false;
                    return Ok(false);
                }
            }
            rows += 1;
            if rows >= SNIFF_ROWS {
                break;
            }
        }
        Ok(true)
    })
    .map_err(|_| all = false);
    Ok(all && any)
}

/// Records a sniff reads at most.
pub(crate) const SNIFF_ROWS: usize = 10_000;

/// A header in Neo4j's convention with the sniffed types written in (what a plain
/// header was read as), and after it the dates not spelled as ISO 8601 (which the
/// convention cannot say), e.g. `(shipped_on: DD/MM/YYYY)`.
pub(crate) fn header_text(header: &Header, sniffed: &Sniffed) -> String {
    let cols = header
        .columns
        .iter()
        .zip(&sniffed.types)
        .map(|(c, t)| match (&c.role, t) {
            (Role::Property, Some(t)) => format!("{}:{}", c.name, t.name()),
            _ => c.raw.clone(),
        })
        .collect::<Vec<_>>()
        .join(",");
    let dates: Vec<String> = header
        .columns
        .iter()
        .zip(&sniffed.dates)
        .filter(|(_, d)| **d != DateOrder::Iso)
        .map(|(c, d)| format!("{}: {}", c.name, d.pattern()))
        .collect();
    if dates.is_empty() {
        cols
    } else {
        format!("{cols} (dates {})", dates.join(", "))
    }
}

/// The first window of a group's data and the types sniffed from it, when they are to
/// be sniffed (`--infer-types`, or a plain header); else no window and no types. A
/// [`RecordSource`] knows its columns' types (an Arrow schema): they are taken as they
/// are for every property column whose header names no type, and nothing is sniffed.
pub(crate) fn sniff(
    rx: &crossbeam_channel::Receiver<Msg>,
    cfg: &ImportConfig,
    group: &InputGroup,
    header: &Header,
    wanted: bool,
) -> Result<(Sniffed, Option<Window>), ImportError> {
    let n = header.columns.len();
    if let Some(src) = &group.source {
        let mut types = src.column_types();
        types.resize(n, None);
        for (t, c) in types.iter_mut().zip(&header.columns) {
            if c.role != Role::Property || c.raw.contains(':') {
                *t = None;
            }
        }
        let dates = vec![DateOrder::Iso; n];
        return Ok((Sniffed { types, dates }, None));
    }
    if !wanted {
        return Ok((Sniffed::none(n), None));
    }
    match rx.recv() {
        Ok(Msg::Window(w)) => {
            let t = infer_types(&w.data, &cfg.dialect, header, &cfg.null_markers);
            Ok((t, Some(w)))
        }
        Ok(Msg::Error(e)) => Err(e.into()),
        _ => Ok((Sniffed::none(n), None)),
    }
}

/// Infers the type of untyped columns from a sample of records (`--infer-types`), and
/// how each date column spells its dates (the first of [`DateOrder::SNIFFED`] that reads
/// every sampled value).
pub(crate) fn infer_types(
    data: &[u8],
    dialect: &Dialect,
    header: &Header,
    null_markers: &[Vec<u8>],
) -> Sniffed {
    let n = header.columns.len();
    // Candidates, from most to least specific; a column keeps the first that parses
    // every non-empty sampled value.
    let cands = [
        ScalarType::Long,
        ScalarType::Double,
        ScalarType::Boolean,
        ScalarType::Date,
        ScalarType::LocalDateTime,
    ];
    let mut ok: Vec<[bool; 5]> = vec![[true; 5]; n];
    let mut orders: Vec<[bool; DateOrder::SNIFFED.len()]> =
        vec![[true; DateOrder::SNIFFED.len()]; n];
    let mut seen = vec![false; n];
    let mut tok = quiver_csv::tokenize::Tokenizer::new(data, dialect);
    let mut fields = quiver_csv::tokenize::Fields::default();
    let mut rows = 0;
    while let Ok(Some(_)) = tok.next_record(&mut fields) {
        if fields.len() != n {
            continue;
        }
        for i in 0..n {
            let f = fields.get(data, i);
            if f.is_empty() || null_markers.iter().any(|m| m == f) {
                continue;
            }
            seen[i] = true;
            let v = &mut ok[i];
            use quiver_csv::value::*;
            // A number only when converting it loses nothing it spells: `007`, `00123`
            // and `+7` stay strings (a code, a zip, a phone prefix), as do integers past
            // 64 bits.
            let plain_number = {
                let d = f.strip_prefix(b"-").unwrap_or(f);
                !(f.first() == Some(&b'+')
                    || (d.len() > 1 && d[0] == b'0' && d[1].is_ascii_digit()))
            };
            v[0] &= plain_number && crate::idmap::canonical_int(f).is_some();
            v[1] &= plain_number
                && parse_f64(f).is_some()
                && !(f.iter().all(u8::is_ascii_digit) && crate::idmap::canonical_int(f).is_none());
            v[2] &= parse_bool(f).is_some();
            if v[3] {
                for (k, o) in DateOrder::SNIFFED.iter().enumerate() {
                    orders[i][k] &= parse_date_as(*o, f).is_some();
                }
                v[3] = orders[i].iter().any(|&x| x);
            }
            v[4] &= parse_local_datetime(f).is_some();
        }
        rows += 1;
        if rows >= SNIFF_ROWS {
            break;
        }
    }
    let types: Vec<Option<DataType>> = (0..n)
        .map(|i| {
            let c = &header.columns[i];
            if c.role != Role::Property || c.raw.contains(':') || !seen[i] {
                return None;
            }
            (0..5)
                .find(|&k| ok[i][k])
                .map(|k| DataType::Scalar(cands[k]))
        })
        .collect();
    let dates = (0..n)
        .map(|i| match types[i] {
            Some(DataType::Scalar(ScalarType::Date)) => DateOrder::SNIFFED
                .into_iter()
                .zip(orders[i])
                .find(|&(_, ok)| ok)
                .map_or(DateOrder::Iso, |(o, _)| o),
            _ => DateOrder::Iso,
        })
        .collect();
    Sniffed { types, dates }
}

/// What a sample says of a header's columns: a type for each untyped property column
/// it could read, and how each date column spells its dates.
pub(crate) struct Sniffed {
    pub(crate) types: Vec<Option<DataType>>,
    pub(crate) dates: Vec<DateOrder>,
}

impl Sniffed {
    pub(crate) fn none(n: usize) -> Sniffed {
        Sniffed {
            types: vec![None; n],
            dates: vec![DateOrder::Iso; n],
        }
    }
}
