//! `PatternMatcher`: an ordered list of (UPat, callback) rules, bucketed by the op of the node they can match.
//!
//! `rewrite(uop, ctx)` tries the rules of the node's op in order; each match is passed to the rule's callback, and the
//! first result that is neither None nor the node itself wins. The callback's parameters are resolved once, when the
//! matcher is built, so a call is positional (captures in parameter order, `ctx` where the callback declares it);
//! callbacks with keyword-only or `**kwargs` parameters are called with keywords instead.

use std::sync::Arc;
use std::time::Instant;

use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

use crate::node::UOp;
use crate::opset::OpSet;
use crate::pattern::{match_node, CPat, Captures, Lease, UPat};
use crate::registry::{self, safe_repr, type_name};
use crate::stats::{self, RuleStats};

/// Where a positional argument comes from.
enum Param {
  /// A capture slot, with the parameter's default for when the match did not bind it.
  Slot(usize, String, Option<Py<PyAny>>),
  /// The rewrite context.
  Ctx,
  /// A parameter the pattern never captures: its default.
  Default(Py<PyAny>),
}

/// Most positional arguments a callback is passed from a stack array; longer plans build a tuple.
const MAX_STACK_ARGS: usize = 8;

/// How to call a rule's callback.
enum Call {
  Positional(Vec<Param>),
  Keywords { names: Vec<(Py<PyString>, usize)>, ctx: bool },
}

/// One compiled rule.
pub struct Rule {
  pat: CPat,
  upat: Py<UPat>,
  fxn: Py<PyAny>,
  call: Call,
  slots: usize,
  early_reject: OpSet,
  stats: Arc<RuleStats>,
  /// `file:line` of the pattern, for error messages.
  pub location: String,
}

/// Working memory for [`PatternMatcher::rewrite_node`]: the capture slots and the match machine. A caller rewriting
/// many nodes (graph_rewrite) keeps one for the whole call, so that no node pays for allocating or fetching them.
#[derive(Default)]
pub struct MatchScratch<'py> {
  caps: Captures<'py>,
  lease: Option<Lease>,
}

thread_local! {
  /// The capture vector of the last [`PatternMatcher::rewrite`] call on this thread, kept empty for the next one: a rewrite
  /// called from Python in a loop then allocates nothing (allocating it was a visible share of such a call's cost).
  static SPARE_CAPS: std::cell::Cell<Vec<Option<Py<PyAny>>>> = const { std::cell::Cell::new(Vec::new()) };
}

/// Moves the allocation of a vector, emptied, to another element type of the same size and alignment.
fn reuse_allocation<A, B>(mut v: Vec<A>) -> Vec<B> {
  const { assert!(std::mem::size_of::<A>() == std::mem::size_of::<B>() && std::mem::align_of::<A>() == std::mem::align_of::<B>()) };
  v.clear();
  let mut v = std::mem::ManuallyDrop::new(v);
  // SAFETY: `v` is empty, so no element is reinterpreted; its buffer was allocated for `capacity` elements of `A`, which has
  // the size and alignment of `B` (checked at compile time above), the condition `Vec::from_raw_parts` puts on reusing an
  // allocation. `ManuallyDrop` keeps `v` from freeing the buffer that the new vector owns.
  unsafe { Vec::from_raw_parts(v.as_mut_ptr() as *mut B, 0, v.capacity()) }
}

/// The pattern matcher.
#[pyclass(frozen, module = "tinygrad.uop.ops", name = "PatternMatcher")]
pub struct PatternMatcher {
  /// The rules as given: a list of `(UPat, fn)`.
  #[pyo3(get)]
  patterns: Py<PyList>,
  rules: Vec<Rule>,
  /// Rule indices by op value.
  buckets: Vec<Vec<u32>>,
}

fn location_str(py: Python<'_>, upat: &UPat) -> String {
  let loc = upat.location.bind(py);
  match loc.extract::<(String, i64)>() {
    Ok((f, l)) => format!("{}:{l}", f.rsplit('/').next().unwrap_or(&f)),
    Err(_) => safe_repr(loc),
  }
}

/// The kind of a callback parameter, as far as planning a call needs it.
#[derive(PartialEq)]
enum Kind {
  /// Positional-only or positional-or-keyword.
  Positional,
  /// `*args`.
  VarPositional,
  /// Keyword-only or `**kwargs`.
  Keyword,
}

/// A callback parameter: name, kind and default.
type ParamInfo = (String, Kind, Option<Py<PyAny>>);

/// Bits of `co_flags` that mark `*args` and `**kwargs`.
const CO_VARARGS: u32 = 0x04;
const CO_VARKEYWORDS: u32 = 0x08;

/// The parameters of a plain Python function read from its code object: what `inspect.signature` returns for it, at a
/// fraction of the cost (building the symbolic matchers at import calls it hundreds of times: benches/README.md, Design
/// measurements). None for anything else (builtins, partials, bound methods, wrapped or annotated-signature functions),
/// which take the inspect path.
fn code_params(fxn: &Bound<'_, PyAny>) -> PyResult<Option<Vec<ParamInfo>>> {
  let Ok(f) = fxn.cast::<pyo3::types::PyFunction>() else { return Ok(None) };
  if f.hasattr("__wrapped__")? || f.hasattr("__signature__")? {
    return Ok(None);
  }
  let code = f.getattr("__code__")?;
  let argcount: usize = code.getattr("co_argcount")?.extract()?;
  let kwonly: usize = code.getattr("co_kwonlyargcount")?.extract()?;
  let flags: u32 = code.getattr("co_flags")?.extract()?;
  let varnames = code.getattr("co_varnames")?;
  let varnames = varnames.cast::<PyTuple>()?;
  let defaults = f.getattr("__defaults__")?;
  let defaults: Vec<Bound<PyAny>> = if defaults.is_none() {
    vec![]
  } else {
    defaults.try_iter()?.collect::<PyResult<_>>()?
  };
  let first_default = argcount.saturating_sub(defaults.len());
  let mut out: Vec<ParamInfo> = Vec::with_capacity(argcount + 2);
  for i in 0..argcount {
    let d = (i >= first_default).then(|| defaults[i - first_default].clone().unbind());
    out.push((varnames.get_item(i)?.extract()?, Kind::Positional, d));
  }
  // co_varnames lists positional parameters, keyword-only ones, then `*args`, then `**kwargs`
  if flags & CO_VARARGS != 0 {
    out.push((varnames.get_item(argcount + kwonly)?.extract()?, Kind::VarPositional, None));
  }
  for i in argcount..argcount + kwonly {
    out.push((varnames.get_item(i)?.extract()?, Kind::Keyword, None));
  }
  if flags & CO_VARKEYWORDS != 0 {
    let at = argcount + kwonly + usize::from(flags & CO_VARARGS != 0);
    out.push((varnames.get_item(at)?.extract()?, Kind::Keyword, None));
  }
  Ok(Some(out))
}

/// The parameters of any callable through `inspect.signature`; None when it has no signature (some builtins).
fn inspect_params(py: Python<'_>, fxn: &Bound<'_, PyAny>) -> PyResult<Option<Vec<ParamInfo>>> {
  let inspect = py.import("inspect")?;
  let Ok(sig) = inspect.call_method1("signature", (fxn,)) else {
    return Ok(None);
  };
  let empty = inspect.getattr("Parameter")?.getattr("empty")?;
  let mut out = vec![];
  for p in sig.getattr("parameters")?.call_method0("values")?.try_iter()? {
    let p = p?;
    let kind = match p.getattr("kind")?.getattr("name")?.extract::<String>()?.as_str() {
      "POSITIONAL_ONLY" | "POSITIONAL_OR_KEYWORD" => Kind::Positional,
      "VAR_POSITIONAL" => Kind::VarPositional,
      _ => Kind::Keyword,
    };
    let default = p.getattr("default")?;
    out.push((p.getattr("name")?.extract()?, kind, (!default.is(&empty)).then(|| default.unbind())));
  }
  Ok(Some(out))
}

fn plan_call(py: Python<'_>, fxn: &Bound<'_, PyAny>, names: &[String]) -> PyResult<Call> {
  let keywords = |ctx: bool| -> PyResult<Call> {
    Ok(Call::Keywords {
      names: names.iter().enumerate().map(|(i, n)| (PyString::new(py, n).unbind(), i)).collect(),
      ctx,
    })
  };
  let params = match code_params(fxn)? {
    Some(p) => p,
    None => match inspect_params(py, fxn)? {
      Some(p) => p,
      // builtins without a signature: pass captures (and no ctx) as keywords
      None => return keywords(false),
    },
  };
  let mut has_ctx = false;
  let mut positional_ok = true;
  let mut plan = vec![];
  let mut accepted: Vec<String> = vec![];
  for (name, kind, default) in params {
    if name == "ctx" {
      has_ctx = true;
    }
    match kind {
      Kind::Positional => {
        if name == "ctx" {
          plan.push(Param::Ctx);
        } else if let Some(i) = names.iter().position(|n| *n == name) {
          plan.push(Param::Slot(i, name.clone(), default));
        } else if let Some(d) = default {
          plan.push(Param::Default(d));
        } else {
          positional_ok = false;
        }
        accepted.push(name);
      }
      Kind::VarPositional => {}
      Kind::Keyword => positional_ok = false,
    }
  }
  if positional_ok && names.iter().all(|n| accepted.contains(n)) {
    Ok(Call::Positional(plan))
  } else {
    keywords(has_ctx)
  }
}

impl PatternMatcher {
  fn build(py: Python<'_>, patterns: &Bound<'_, PyAny>) -> PyResult<PatternMatcher> {
    let list = PyList::empty(py);
    let mut rules = vec![];
    let mut buckets: Vec<Vec<u32>> = vec![vec![]; 256];
    let n_ops = registry::get(py)?.ops.len();
    for (i, item) in patterns.try_iter()?.enumerate() {
      let item = item?;
      let (upat, fxn): (Bound<PyAny>, Bound<PyAny>) = item.extract().map_err(|_| {
        PyTypeError::new_err(format!(
          "PatternMatcher rule {i} must be a (UPat, callable) pair, got {}",
          safe_repr(&item)
        ))
      })?;
      let upat = upat.cast_into::<UPat>().map_err(|e| {
        PyTypeError::new_err(format!(
          "PatternMatcher rule {i} must start with a UPat, got {}",
          safe_repr(&e.into_inner())
        ))
      })?;
      if !fxn.is_callable() {
        return Err(PyTypeError::new_err(format!(
          "PatternMatcher rule {i}: {} {} is not callable",
          type_name(&fxn),
          safe_repr(&fxn)
        )));
      }
      let mut names = vec![];
      let pat = CPat::compile(py, &upat, &mut names)?;
      let call = plan_call(py, &fxn, &names)?;
      let u = upat.get();
      let idx = rules.len() as u32;
      match pat.root_ops() {
        Some(ops) => ops.iter().for_each(|op| buckets[op as usize].push(idx)),
        None => (0..n_ops).for_each(|op| buckets[op].push(idx)),
      }
      if stats::level() > 0 {
        stats::register(upat.as_any(), &u.stats);
      }
      rules.push(Rule {
        pat,
        fxn: fxn.clone().unbind(),
        call,
        slots: names.len(),
        early_reject: u.early_reject,
        stats: u.stats.clone(),
        location: location_str(py, u),
        upat: upat.clone().unbind(),
      });
      list.append((upat, fxn))?;
    }
    Ok(PatternMatcher {
      patterns: list.unbind(),
      rules,
      buckets,
    })
  }

  fn call_rule<'py>(&self, rule: &Rule, caps: &Captures<'py>, ctx: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let py = ctx.py();
    let f = rule.fxn.bind(py);
    match &rule.call {
      Call::Positional(plan) if plan.len() <= MAX_STACK_ARGS => {
        // Borrowed argument pointers on the stack, called through vectorcall: no argument tuple is allocated. Slot 0
        // is left free so that PY_VECTORCALL_ARGUMENTS_OFFSET lets a bound-method call use it without copying.
        let mut args: [*mut ffi::PyObject; MAX_STACK_ARGS + 1] = [std::ptr::null_mut(); MAX_STACK_ARGS + 1];
        for (k, p) in plan.iter().enumerate() {
          args[k + 1] = match p {
            Param::Ctx => ctx.as_ptr(),
            Param::Default(d) => d.as_ptr(),
            Param::Slot(i, name, default) => match (&caps[*i], default) {
              (Some(n), _) => n.as_ptr(),
              (None, Some(d)) => d.as_ptr(),
              (None, None) => {
                return Err(PyTypeError::new_err(format!(
                  "rule at {}: the match did not capture '{name}'",
                  rule.location
                )))
              }
            },
          };
        }
        let nargs = plan.len() | ffi::PY_VECTORCALL_ARGUMENTS_OFFSET;
        // SAFETY: `f` is a live object; `args[1..=plan.len()]` are borrowed pointers to objects kept alive for the
        // whole call by `ctx`, `rule` (defaults) and `caps`, which outlive it; slot 0 exists and may be overwritten
        // by the callee as PY_VECTORCALL_ARGUMENTS_OFFSET allows; no keyword names are passed. The result is a new
        // reference or NULL with an exception set, which `from_owned_ptr_or_err` takes over.
        unsafe {
          let r = ffi::PyObject_Vectorcall(f.as_ptr(), args.as_mut_ptr().add(1), nargs, std::ptr::null_mut());
          Bound::from_owned_ptr_or_err(py, r)
        }
      }
      Call::Positional(plan) => {
        let mut args: Vec<Bound<PyAny>> = Vec::with_capacity(plan.len());
        for p in plan {
          args.push(match p {
            Param::Ctx => ctx.clone(),
            Param::Default(d) => d.bind(py).clone(),
            Param::Slot(i, name, default) => match (&caps[*i], default) {
              (Some(n), _) => n.clone(),
              (None, Some(d)) => d.bind(py).clone(),
              (None, None) => {
                return Err(PyTypeError::new_err(format!(
                  "rule at {}: the match did not capture '{name}'",
                  rule.location
                )))
              }
            },
          });
        }
        f.call1(PyTuple::new(py, args)?)
      }
      Call::Keywords { names, ctx: with_ctx } => {
        let kw = PyDict::new(py);
        for (name, i) in names {
          if let Some(n) = &caps[*i] {
            kw.set_item(name.bind(py), n)?;
          }
        }
        if *with_ctx {
          kw.set_item("ctx", ctx)?;
        }
        f.call((), Some(&kw))
      }
    }
  }

  /// Tries the rules for `node`'s op; returns the replacement and the index of the rule that produced it.
  /// `scratch` is working memory only: its contents on entry do not matter.
  pub fn rewrite_node<'py>(
    &self,
    node: &Bound<'py, UOp>,
    ctx: &Bound<'py, PyAny>,
    scratch: &mut MatchScratch<'py>,
  ) -> PyResult<Option<(Bound<'py, PyAny>, usize)>> {
    let py = node.py();
    let n = node.get();
    let bucket = &self.buckets[n.op as usize];
    if bucket.is_empty() {
      return Ok(None);
    }
    let mut src_ops = OpSet::default();
    for c in n.children(py) {
      // SAFETY: sources of a UOp are UOps (checked by the constructor).
      src_ops.insert(unsafe { c.cast_unchecked::<UOp>() }.get().op);
    }
    let level = stats::level();
    let node_any = node.as_any();
    let MatchScratch { caps, lease } = scratch;
    for &ri in bucket {
      let rule = &self.rules[ri as usize];
      let start = if level > 0 { Some(Instant::now()) } else { None };
      if !rule.early_reject.is_subset(&src_ops) {
        if let Some(t) = start {
          rule.stats.record(false, false, t.elapsed().as_nanos() as u64);
        }
        continue;
      }
      caps.clear();
      caps.resize(rule.slots, None);
      let found = match_node(
        &rule.pat,
        node_any,
        caps,
        &mut |caps: &mut Captures<'py>| {
          let r = self.call_rule(rule, caps, ctx)?;
          Ok(if r.is_none() { None } else { Some(r) })
        },
        lease,
      );
      let found = match found {
        Ok(f) => f,
        Err(e) => {
          let _ = e.value(py).call_method1(
            "add_note",
            (format!("in the callback of the rule at {}", self.rule_source(py, ri as usize)),),
          );
          return Err(e);
        }
      };
      let matched = matches!(&found, Some(r) if !r.is(node_any));
      if let Some(t) = start {
        let ns = t.elapsed().as_nanos() as u64;
        rule.stats.record(true, matched, ns);
        if matched && level >= 2 {
          if let Some(r) = &found {
            registry::get(py)?
              .track_hook
              .bind(py)
              .call1(("match", node, r, rule.upat.bind(py), ns as f64 * 1e-9))?;
          }
        }
      }
      if matched {
        return Ok(found.map(|r| (r, ri as usize)));
      }
    }
    Ok(None)
  }

  /// `file:line` of rule `i` as a full path, for messages.
  pub fn rule_source(&self, py: Python<'_>, i: usize) -> String {
    let loc = self.rules[i].upat.get().location.bind(py);
    match loc.extract::<(String, i64)>() {
      Ok((f, l)) => format!("{f}:{l}"),
      Err(_) => safe_repr(loc),
    }
  }
}

#[pymethods]
impl PatternMatcher {
  #[new]
  #[pyo3(signature = (patterns, compiled=true))]
  fn py_new(py: Python<'_>, patterns: &Bound<'_, PyAny>, compiled: bool) -> PyResult<Self> {
    let _ = compiled;
    PatternMatcher::build(py, patterns)
  }

  /// The replacement for `uop` from the first rule that produces one, or None.
  #[pyo3(signature = (uop, ctx=None))]
  fn rewrite<'py>(&self, uop: &Bound<'py, PyAny>, ctx: Option<&Bound<'py, PyAny>>) -> PyResult<Option<Bound<'py, PyAny>>> {
    let py = uop.py();
    let node = uop
      .cast::<UOp>()
      .map_err(|_| PyTypeError::new_err(format!("PatternMatcher.rewrite expects a UOp, got {} {}", type_name(uop), safe_repr(uop))))?;
    let none = py.None().into_bound(py);
    // `Bound<'py, PyAny>` is a `Py<PyAny>` beside a zero-sized token, so the spare vector's buffer fits the captures
    let mut scratch = MatchScratch {
      caps: reuse_allocation(SPARE_CAPS.take()),
      lease: None,
    };
    let found = self.rewrite_node(node, ctx.unwrap_or(&none), &mut scratch);
    SPARE_CAPS.set(reuse_allocation(std::mem::take(&mut scratch.caps)));
    Ok(found?.map(|(r, _)| r))
  }

  fn __add__(&self, py: Python<'_>, other: &Bound<'_, PatternMatcher>) -> PyResult<Self> {
    let all = self.patterns.bind(py).add(other.get().patterns.bind(py))?;
    PatternMatcher::build(py, &all)
  }

  fn __len__(&self) -> usize {
    self.rules.len()
  }
}
