//! How a rule's callback is called. Its parameters are resolved once, when the matcher is built, so a call is
//! positional (captures in parameter order, `ctx` where the callback declares it); callbacks with keyword-only or
//! `**kwargs` parameters are called with keywords instead.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyTuple};

use crate::cpython::stack_call::{StackArgs, MAX_STACK_ARGS};
use crate::node::PyNode;

/// Where a positional argument comes from.
enum Param {
  /// A capture slot, with the parameter's default for when the match did not bind it.
  Slot(usize, String, Option<Py<PyAny>>),
  /// The rewrite context.
  Ctx,
  /// A parameter the pattern never captures: its default.
  Default(Py<PyAny>),
}

/// How to call the callback.
enum Call {
  Positional(Vec<Param>),
  Keywords { names: Vec<(Py<PyString>, usize)>, ctx: bool },
}

/// A rule's callback and how to call it.
pub struct Callback {
  fxn: Py<PyAny>,
  call: Call,
}

impl Callback {
  /// Plans calls of `fxn` with the captures named `names` (by slot).
  pub fn plan(py: Python<'_>, fxn: &Bound<'_, PyAny>, names: &[String]) -> PyResult<Callback> {
    Ok(Callback {
      fxn: fxn.clone().unbind(),
      call: plan_call(py, fxn, names)?,
    })
  }

  /// Calls the callback with the captures `caps` (by slot) and `ctx`; `location` names the rule in errors.
  ///
  /// # Safety
  /// Every bound capture must be a live object for the duration of the call.
  pub unsafe fn call<'a, 'py>(&'a self, caps: &[Option<PyNode>], ctx: &'a Bound<'py, PyAny>, location: &str) -> PyResult<Bound<'py, PyAny>> {
    let py = ctx.py();
    let f = self.fxn.bind(py);
    // SAFETY: the caller keeps every capture alive for the duration of this call, and the borrows made here end with it.
    let capture = |n: PyNode| -> Borrowed<'a, 'py, PyAny> { unsafe { Borrowed::from_ptr(py, n.0) } };
    match &self.call {
      Call::Positional(plan) => {
        let arg = |p: &'a Param| -> PyResult<Borrowed<'a, 'py, PyAny>> {
          Ok(match p {
            Param::Ctx => ctx.as_borrowed(),
            Param::Default(d) => d.bind_borrowed(py),
            Param::Slot(i, name, default) => match (caps[*i], default) {
              (Some(n), _) => capture(n),
              (None, Some(d)) => d.bind_borrowed(py),
              (None, None) => return Err(PyTypeError::new_err(format!("rule at {location}: the match did not capture '{name}'"))),
            },
          })
        };
        if plan.len() <= MAX_STACK_ARGS {
          let mut args = StackArgs::default();
          for p in plan {
            args.push(arg(p)?);
          }
          args.call(f)
        } else {
          f.call1(PyTuple::new(py, plan.iter().map(arg).collect::<PyResult<Vec<_>>>()?)?)
        }
      }
      Call::Keywords { names, ctx: with_ctx } => {
        let kw = PyDict::new(py);
        for (name, i) in names {
          if let Some(n) = caps[*i] {
            kw.set_item(name.bind(py), capture(n))?;
          }
        }
        if *with_ctx {
          kw.set_item("ctx", ctx)?;
        }
        f.call((), Some(&kw))
      }
    }
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
