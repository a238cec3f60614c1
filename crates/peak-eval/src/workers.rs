//! The worker processes a validation or a tuning run talks to, one per backend, started
//! on first use and kept for the whole run.

use std::collections::HashMap;

use peak_backend::worker::{PoolOptions, WorkerCommand, WorkerPool};

use crate::error::EvalError;

/// Makes the command line of a worker for a backend name.
pub type CommandFactory = Box<dyn Fn(&str) -> std::io::Result<WorkerCommand>>;

pub struct Workers {
    factory: CommandFactory,
    options: PoolOptions,
    pools: HashMap<String, WorkerPool>,
}

impl Workers {
    pub fn new(factory: CommandFactory, options: PoolOptions) -> Workers {
        Workers { factory, options, pools: HashMap::new() }
    }

    /// Workers started as `<this executable> worker --backend NAME`: what the `peak` binary uses.
    pub fn peak(options: PoolOptions) -> Workers {
        Workers::new(Box::new(WorkerCommand::peak), options)
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
