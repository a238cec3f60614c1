//! The worker processes a validation or a tuning run talks to, one per backend, started
//! on first use and kept for the whole run.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use peak_backend::worker::launcher::{self, Placement};
use peak_backend::worker::{Dispatch, Fleet, PoolOptions, WorkerCommand, WorkerPool};

use crate::error::EvalError;

/// Makes the command line of a worker for a backend name.
pub type CommandFactory = Box<dyn Fn(&str) -> std::io::Result<WorkerCommand>>;

/// Which devices tuning spreads over.
enum Devices {
    /// One worker per backend.
    One,
    /// As the command placed its workers (`--devices`, `$PEAK_DEVICES`, every GPU).
    Placed(Placement),
}

pub struct Workers {
    factory: CommandFactory,
    options: PoolOptions,
    pools: HashMap<String, WorkerPool>,
    devices: Devices,
    fleets: HashMap<String, Fleet>,
}

impl Workers {
    pub fn new(factory: CommandFactory, options: PoolOptions) -> Workers {
        Workers { factory, options, pools: HashMap::new(), devices: Devices::One, fleets: HashMap::new() }
    }

    /// Workers started as `<this executable> worker --backend NAME`: what the `peak` binary
    /// uses, under `placement`'s launcher and tuning on its devices.
    pub fn peak(options: PoolOptions, placement: Placement) -> Workers {
        let under = placement.clone();
        let factory: CommandFactory = Box::new(move |backend| WorkerCommand::peak(backend, &under));
        Workers { devices: Devices::Placed(placement), ..Workers::new(factory, options) }
    }

    fn devices(&self, backend: &str) -> Vec<String> {
        match &self.devices {
            Devices::One => Vec::new(),
            Devices::Placed(placement) => placement.devices(backend),
        }
    }

    /// Where a tuning run, and validation's compared runs, send their jobs: one worker per
    /// device when there are several (the [`Fleet`] is started on first use and kept),
    /// else the backend's pool. The pool stays the one that records references.
    pub fn dispatch(&mut self, backend: &str) -> Result<&mut dyn Dispatch, EvalError> {
        let devices = self.devices(backend);
        if devices.len() <= 1 {
            return Ok(self.pool(backend)?);
        }
        if !self.fleets.contains_key(backend) {
            let variable = launcher::device_variable(backend);
            let commands = devices
                .iter()
                .map(|d| {
                    self.command(backend).map(|c| match variable {
                        Some(var) => c.env(var, d),
                        None => c,
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            let fleet = Fleet::start(backend, commands, self.options.clone())?;
            self.fleets.insert(backend.to_string(), fleet);
        }
        Ok(self.fleets.get_mut(backend).expect("inserted above"))
    }

    /// Whether jobs for `backend` go to several devices' workers ([`Self::dispatch`]).
    pub fn spreads(&self, backend: &str) -> bool {
        self.devices(backend).len() > 1
    }

    /// Jobs each device's worker answered, when `backend` runs on several; else empty.
    pub fn served(&self, backend: &str) -> Vec<usize> {
        self.fleets.get(backend).map(Fleet::served).unwrap_or_default()
    }

    /// Worker restarts for `backend` so far, every device's included.
    pub fn restarts(&self, backend: &str) -> usize {
        self.pools.get(backend).map_or(0, WorkerPool::restarts) + self.fleets.get(backend).map_or(0, Fleet::restarts)
    }

    pub fn options(&self) -> &PoolOptions {
        &self.options
    }

    /// The command line a worker for `backend` starts with (tools wrap it).
    pub fn command(&self, backend: &str) -> Result<WorkerCommand, EvalError> {
        (self.factory)(backend).map_err(|e| EvalError::Tool {
            tool: "peak worker".into(),
            message: format!("cannot tell how to start a {backend} worker: {e}"),
            hint: "run peak from its installed path".into(),
        })
    }

    /// The pool for `backend`, started if needed.
    pub fn pool(&mut self, backend: &str) -> Result<&mut WorkerPool, EvalError> {
        if !self.pools.contains_key(backend) {
            let command = self.command(backend)?;
            let pool = WorkerPool::start(backend, command, self.options.clone())?;
            self.pools.insert(backend.to_string(), pool);
        }
        Ok(self.pools.get_mut(backend).expect("inserted above"))
    }

    /// The pool of a compile-only worker for `backend` (`peak worker --compile-only`),
    /// started if needed. It answers [`Job::compile_only`](peak_backend::worker::Job)
    /// requests where no device runs the kernel: CUDA and HIP through NVRTC for `arch` (a
    /// target such as `sm_90a`; the worker's default when `None`), the other backends
    /// through their local driver.
    pub fn compile_pool(&mut self, backend: &str, arch: Option<&str>) -> Result<&mut WorkerPool, EvalError> {
        let key = format!("{backend} compile-only {}", arch.unwrap_or("default"));
        if !self.pools.contains_key(&key) {
            let mut command = self.command(backend)?.arg("--compile-only");
            if let Some(arch) = arch {
                command = command.arg("--arch").arg(arch);
            }
            let pool = WorkerPool::start(backend, command, self.options.clone())?;
            self.pools.insert(key.clone(), pool);
        }
        Ok(self.pools.get_mut(&key).expect("inserted above"))
    }
}

/// The path a job names for the worker: canonical, so the worker's own working folder
/// does not matter (the path as given where it cannot be resolved).
pub(crate) fn absolute(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}
