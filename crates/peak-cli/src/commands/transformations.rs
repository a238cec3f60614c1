//! `peak transformations [list|show NAME]`.

use anyhow::Result;
use peak_transform::Library;

use crate::cli::{TransformationsAction, TransformationsArgs};
use crate::output::print_json;
use crate::usage;

/// The built-in library plus any `--dir` folders.
pub fn library(dirs: &[std::path::PathBuf]) -> Result<Library> {
    let mut library = Library::builtin()?;
    for dir in dirs {
        library.add_dir(dir).map_err(usage)?;
    }
    Ok(library)
}

pub fn run(args: TransformationsArgs) -> Result<()> {
    let library = library(&args.dirs)?;
    match args.action.unwrap_or(TransformationsAction::List) {
        TransformationsAction::List => {
            if args.json {
                return print_json(&library.list().iter().map(|t| Library::summary(t, true)).collect::<Vec<_>>());
            }
            let width = library.list().iter().map(|t| t.name.len()).max().unwrap_or(0);
            for t in library.list() {
                let params = t.tuning.iter().map(|p| p.name.as_str()).collect::<Vec<_>>().join(" ");
                println!("{:<width$}  {:>2} pass{}  {:<28}  {}", t.name, t.passes.len(), if t.passes.len() == 1 { " " } else { "es" }, params, t.description);
            }
        }
        TransformationsAction::Show { name } => {
            let t = library.get(&name).map_err(usage)?;
            if args.json {
                return print_json(&Library::summary(t, true));
            }
            print!("{}", library.show(t));
        }
    }
    Ok(())
}
