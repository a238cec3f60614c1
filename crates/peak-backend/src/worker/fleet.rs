//! Several devices at once: one [`WorkerPool`] per device, each on a thread of its own,
//! behind the same `submit` / `next_answer` calls as a single pool.
//!
//! A job goes to the device with the fewest jobs pending, so a faster device takes more.
//! Each pool keeps its own worker, crash handling and restarts: a kernel that crashes or
//! hangs one device's worker costs that worker a restart and nothing else. Answers come in
//! the order they are ready, not the order of submission: a tuning run does not care, and
//! waiting for the slowest device would idle the others.

use std::collections::HashMap;
use std::sync::mpsc;
use std::thread::JoinHandle;

use crate::backend::DeviceInfo;

use super::command::WorkerCommand;
use super::error::WorkerError;
use super::pool::{Answer, PoolOptions, WorkerPool};
use super::protocol::{Failure, Job, RunReport};

/// Either one pool or a fleet: what a tuning run sends its jobs to.
pub trait Dispatch {
    fn submit(&mut self, job: Job) -> u64;
    /// The next answer; `None` when nothing is pending.
    fn next_answer(&mut self) -> Result<Option<Answer>, WorkerError>;
    /// Jobs worth keeping in flight, so every device's compiles run ahead of it.
    fn capacity(&self) -> usize;

    /// Run every job, keeping `capacity()` of them in flight, and return their results in
    /// the jobs' order (with nothing else pending).
    fn run_all(&mut self, jobs: Vec<Job>) -> Result<Vec<Result<RunReport, Failure>>, WorkerError> {
        let count = jobs.len();
        let mut jobs = jobs.into_iter().enumerate();
        let mut slot_of = HashMap::new();
        let mut results: Vec<Option<Result<RunReport, Failure>>> = (0..count).map(|_| None).collect();
        loop {
            while slot_of.len() < self.capacity() {
                let Some((slot, job)) = jobs.next() else { break };
                slot_of.insert(self.submit(job), slot);
            }
            let Some(answer) = self.next_answer()? else { break };
            if let Some(slot) = slot_of.remove(&answer.id) {
                results[slot] = Some(answer.result);
            }
        }
        results
            .into_iter()
            .enumerate()
            .map(|(slot, r)| r.ok_or_else(|| WorkerError::Protocol { message: format!("job {slot} of {count} was never answered") }))
            .collect()
    }
}

impl Dispatch for WorkerPool {
    fn submit(&mut self, job: Job) -> u64 {
        WorkerPool::submit(self, job)
    }
    fn next_answer(&mut self) -> Result<Option<Answer>, WorkerError> {
        WorkerPool::next_answer(self)
    }
    fn capacity(&self) -> usize {
        self.options().max_in_flight.max(1)
    }
}

/// What a device's thread reports: an answer (under the fleet's id, boxed: an answer is
/// hundreds of bytes and an end a few), or its pool's end.
enum Report {
    Answer { lane: usize, answer: Box<Answer>, restarts: usize },
    Broken { lane: usize, error: WorkerError },
}

struct Lane {
    jobs: Option<mpsc::Sender<(u64, Job)>>,
    pending: usize,
    served: usize,
    restarts: usize,
    device: DeviceInfo,
    thread: Option<JoinHandle<()>>,
}

pub struct Fleet {
    lanes: Vec<Lane>,
    reports: mpsc::Receiver<Report>,
    next_id: u64,
    /// Which lane holds each pending job.
    holder: HashMap<u64, usize>,
    max_in_flight: usize,
}

impl Fleet {
    /// Start one pool per command (one command per device), all at once, and wait until
    /// every worker is ready. `backend` names the backend in messages.
    pub fn start(backend: &str, commands: Vec<WorkerCommand>, options: PoolOptions) -> Result<Fleet, WorkerError> {
        let (report_tx, reports) = mpsc::channel();
        let (ready_tx, ready_rx) = mpsc::channel();
        let mut started = Vec::new();
        for (lane, command) in commands.into_iter().enumerate() {
            let (jobs, job_rx) = mpsc::channel::<(u64, Job)>();
            let (backend, options, report_tx, ready_tx) = (backend.to_string(), options.clone(), report_tx.clone(), ready_tx.clone());
            let thread = std::thread::spawn(move || match WorkerPool::start(&backend, command, options) {
                Ok(pool) => {
                    let _ = ready_tx.send((lane, Ok(pool.device().clone())));
                    drive(lane, pool, job_rx, report_tx);
                }
                Err(e) => {
                    let _ = ready_tx.send((lane, Err(e)));
                }
            });
            started.push((jobs, thread));
        }
        drop(ready_tx);
        let mut devices: Vec<Option<DeviceInfo>> = vec![None; started.len()];
        // Exactly one word from each lane: a lane's thread keeps its sender while it runs.
        for (lane, ready) in ready_rx.iter().take(started.len()) {
            devices[lane] = Some(ready?);
        }
        let lanes = started
            .into_iter()
            .zip(devices)
            .map(|((jobs, thread), device)| Lane {
                jobs: Some(jobs),
                pending: 0,
                served: 0,
                restarts: 0,
                device: device.expect("every lane reported"),
                thread: Some(thread),
            })
            .collect();
        let max_in_flight = options.max_in_flight.max(1);
        Ok(Fleet { lanes, reports, next_id: 1, holder: HashMap::new(), max_in_flight })
    }

    /// The devices, one per worker, in the order of the commands.
    pub fn devices(&self) -> impl Iterator<Item = &DeviceInfo> {
        self.lanes.iter().map(|l| &l.device)
    }

    /// Jobs answered by each device, in the order of the commands.
    pub fn served(&self) -> Vec<usize> {
        self.lanes.iter().map(|l| l.served).collect()
    }

    /// Worker restarts, all devices together.
    pub fn restarts(&self) -> usize {
        self.lanes.iter().map(|l| l.restarts).sum()
    }
}

impl Dispatch for Fleet {
    fn submit(&mut self, job: Job) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let lane = (0..self.lanes.len()).filter(|&l| self.lanes[l].jobs.is_some()).min_by_key(|&l| self.lanes[l].pending).unwrap_or(0);
        self.lanes[lane].pending += 1;
        self.holder.insert(id, lane);
        if let Some(jobs) = &self.lanes[lane].jobs {
            // A lane whose thread has ended reports why through `reports`.
            let _ = jobs.send((id, job));
        }
        id
    }

    fn next_answer(&mut self) -> Result<Option<Answer>, WorkerError> {
        if self.holder.is_empty() {
            return Ok(None);
        }
        match self.reports.recv() {
            Ok(Report::Answer { lane, answer, restarts }) => {
                self.lanes[lane].pending -= 1;
                self.lanes[lane].served += 1;
                self.lanes[lane].restarts = restarts;
                self.holder.remove(&answer.id);
                Ok(Some(*answer))
            }
            Ok(Report::Broken { lane, error }) => {
                self.lanes[lane].jobs = None;
                Err(error)
            }
            Err(_) => Err(WorkerError::Protocol { message: "every device's worker thread has ended".into() }),
        }
    }

    fn capacity(&self) -> usize {
        self.max_in_flight * self.lanes.len()
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for lane in &mut self.lanes {
            lane.jobs = None; // the thread ends when its queue closes and its pool drains
        }
        for lane in &mut self.lanes {
            if let Some(thread) = lane.thread.take() {
                let _ = thread.join();
            }
        }
    }
}

/// A device's thread: hand queued jobs to the pool, report each answer under the fleet's
/// id. It waits for new jobs only when its pool has nothing left to answer.
fn drive(lane: usize, mut pool: WorkerPool, jobs: mpsc::Receiver<(u64, Job)>, reports: mpsc::Sender<Report>) {
    let mut fleet_ids: HashMap<u64, u64> = HashMap::new();
    loop {
        if pool.pending() == 0 {
            match jobs.recv() {
                Ok((id, job)) => {
                    fleet_ids.insert(pool.submit(job), id);
                }
                Err(_) => return,
            }
        }
        while let Ok((id, job)) = jobs.try_recv() {
            fleet_ids.insert(pool.submit(job), id);
        }
        match pool.next_answer() {
            Ok(Some(answer)) => {
                let id = fleet_ids.remove(&answer.id).expect("every pool job came from the fleet");
                if reports.send(Report::Answer { lane, answer: Box::new(Answer { id, ..answer }), restarts: pool.restarts() }).is_err() {
                    return;
                }
            }
            Ok(None) => {}
            Err(error) => {
                let _ = reports.send(Report::Broken { lane, error });
                return;
            }
        }
    }
}
