//! What the server needs from its host program: how to start workers, where they run, the
//! extra transformation folders and the caches; and where one call's workers run.

use std::path::PathBuf;
use std::sync::Arc;

use peak_backend::worker::PoolOptions;
use peak_backend::worker::launcher::Placement;
use peak_eval::Workers;

use crate::params::PlacementParams;

/// Makes the worker processes one tool call runs kernels in, placed as the call and the
/// server say. Called on the thread doing the work (a `Workers` holds child processes and
/// stays on that thread).
pub type WorkersFactory = Arc<dyn Fn(&Placement) -> Workers + Send + Sync>;

/// What the server needs from its host program.
#[derive(Clone)]
pub struct Settings {
    pub workers: WorkersFactory,
    /// Where workers run unless a call says otherwise (the server's `--worker-launcher`
    /// and `--devices`).
    pub placement: Placement,
    /// Transformation folders layered over the built-in library for every call.
    pub library_dirs: Vec<PathBuf>,
    /// Results and reference caches (default: `peak_eval::default_cache_dir()`).
    pub cache_dir: Option<PathBuf>,
}

impl Settings {
    /// Workers started as `<this executable> worker --backend NAME`: the `peak` binary,
    /// placed as `placement` says (the server's `--worker-launcher` and `--devices`).
    pub fn peak(placement: Placement) -> Settings {
        Settings {
            workers: Arc::new(|placement| Workers::peak(PoolOptions::default(), placement.clone())),
            placement,
            library_dirs: Vec::new(),
            cache_dir: None,
        }
    }

    /// A call's workers, placed by [`Self::placement_for`].
    pub fn workers_for(&self, call: &PlacementParams) -> Workers {
        (self.workers)(&self.placement_for(call))
    }

    /// Where a call's workers run: its `worker_launcher` and `devices` where given, else
    /// the server's (each on its own).
    pub fn placement_for(&self, call: &PlacementParams) -> Placement {
        let PlacementParams { worker_launcher, devices } = call;
        let given = Placement::new(worker_launcher.as_deref(), devices.as_deref());
        Placement { launcher: given.launcher.or_else(|| self.placement.launcher.clone()), devices: given.devices.or_else(|| self.placement.devices.clone()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_calls_placement_wins_field_by_field_over_the_servers() {
        let server = Settings::peak(Placement::new(Some("srun -n1"), Some("0,1")));
        assert_eq!(server.placement_for(&PlacementParams::default()), server.placement);
        let call = PlacementParams { worker_launcher: Some("ssh gpu-box".into()), devices: None };
        assert_eq!(server.placement_for(&call), Placement::new(Some("ssh gpu-box"), Some("0,1")));
        let call = PlacementParams { worker_launcher: None, devices: Some("all".into()) };
        assert_eq!(server.placement_for(&call), Placement::new(Some("srun -n1"), Some("all")));
    }
}
