package io.github.jobq.worker;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.lang.System.Logger.Level;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Pulls jobs of its registered job types from a jobq replica and runs them on a fixed thread pool
 * of {@code concurrency} threads; it never fetches more jobs than it has free threads.
 *
 * <p>{@link #builder(List)} takes several replicas: the worker talks to one at a time and moves to
 * the next one when a call gets no answer or a 5xx answer (a replica that died, froze or is cut off);
 * the held jobs' heartbeats and completions go there too, since task tokens are valid at every replica.
 *
 * <pre>{@code
 * Worker worker = Worker.builder("http://127.0.0.1:8080")
 *     .concurrency(4)
 *     .handler("resize", ctx -> Map.of("cpus", ctx.params().get("cpus").getAsInt()))
 *     .build();
 * worker.run(); // until the JVM shuts down (SIGTERM, Ctrl-C) or stop() is called
 * }</pre>
 */
public final class Worker implements AutoCloseable {
  public static final String VERSION = "0.1.0";
  private static final System.Logger LOG = System.getLogger("jobq.worker");
  // Completion retries: backoff from 100 ms doubling to 5 s (docs/workers.md, rule 3).
  private static final long BACKOFF_FIRST_MS = 100;
  private static final long BACKOFF_MAX_MS = 5_000;
  // A fetch answered with one of these is a configuration error (a job type that is not remote, a wrong
  // or missing token, no worker protocol on that server): every retry would get the same, so it stops.
  private static final Set<Integer> FETCH_REFUSED = Set.of(400, 401, 403, 404);
  private static final AtomicInteger POOLS = new AtomicInteger();
  // The attempt's log takes lines of at most 4,096 bytes and 65,536 bytes in all; a handler's stack
  // trace is cut to fit in a quarter of that, keeping its start (the exception, the innermost frames).
  private static final int LOG_LINE_BYTES = 4_096;
  private static final int TRACE_LOG_BYTES = 16_384;

  private final Client client;
  private final Replicas replicas;
  private final String workerId;
  private final int concurrency;
  private final Duration shutdownTimeout;
  private final Map<String, String> labels;
  private final int waitMs;
  private final Map<String, JobHandler> handlers;
  private final Map<String, Run> runs = new LinkedHashMap<>(); // task token → run; guarded by itself
  private final ExecutorService pool;
  private final CountDownLatch stopped = new CountDownLatch(1);
  private volatile boolean stopping;
  private volatile ApiException refused; // the fetch refusal that stopped the worker
  private volatile CompletableFuture<?> fetchCall;
  private Thread fetchThread;
  private Thread heartbeatThread;
  private boolean stopCalled; // guarded by this

  private Worker(Builder b) {
    List<Client> clients = new ArrayList<>();
    if (b.client != null) {
      clients.add(b.client);
    } else {
      for (String s : b.servers) clients.add(new Client(s, b.token));
    }
    this.client = clients.get(0);
    this.replicas = new Replicas(clients, b.client != null ? List.of("(client)") : b.servers);
    this.workerId = b.workerId != null && !b.workerId.isEmpty() ? b.workerId : defaultWorkerId();
    this.concurrency = b.concurrency;
    this.shutdownTimeout = b.shutdownTimeout;
    this.labels = Map.copyOf(b.labels);
    this.waitMs = b.waitMs;
    this.handlers = new TreeMap<>(b.handlers);
    int n = POOLS.incrementAndGet();
    AtomicInteger threads = new AtomicInteger();
    this.pool = Executors.newFixedThreadPool(concurrency, r -> {
      Thread t = new Thread(r, "jobq-worker-" + n + "-job-" + threads.incrementAndGet());
      t.setDaemon(true); // a handler that ignores cancellation does not keep the JVM alive
      return t;
    });
  }

  /** A builder for a worker of the replica at {@code server}, e.g. {@code http://127.0.0.1:8080}. */
  public static Builder builder(String server) {
    return new Builder(List.of(server));
  }

  /**
   * A builder for a worker of several replicas, tried in this order: the worker moves to the next one
   * (round robin) when a call gets no answer or a 5xx answer.
   */
  public static Builder builder(List<String> servers) {
    if (servers.isEmpty()) throw new IllegalArgumentException("servers: required (replicas' base URLs)");
    return new Builder(List.copyOf(servers));
  }

  public String workerId() {
    return workerId;
  }

  public Client client() {
    return client;
  }

  /** Starts fetching and heartbeating in background threads. */
  public synchronized void start() {
    if (fetchThread != null) throw new IllegalStateException("start: already started");
    LOG.log(Level.INFO, "worker {0} started: job_types={1} concurrency={2} replicas={3}", workerId,
        String.join(",", handlers.keySet()), concurrency, String.join(",", replicas.urls()));
    fetchThread = new Thread(this::fetchLoop, "jobq-fetch");
    heartbeatThread = new Thread(this::heartbeatLoop, "jobq-heartbeat");
    fetchThread.setDaemon(true);
    heartbeatThread.setDaemon(true);
    fetchThread.start();
    heartbeatThread.start();
  }

  /**
   * Starts, and blocks until the worker is stopped: by {@link #stop()} from another thread, by the
   * JVM shutting down (SIGTERM, Ctrl-C), when a shutdown hook stops it gracefully, or by a fetch
   * refused as a configuration error (see {@link #awaitStopped()}), which it then throws.
   *
   * @throws ApiException the fetch answer (400, 401, 403 or 404) that stopped the worker
   */
  public void run() throws InterruptedException, ApiException {
    Thread hook = new Thread(this::stop, "jobq-shutdown");
    Runtime.getRuntime().addShutdownHook(hook);
    start();
    try {
      awaitStopped();
    } finally {
      try {
        Runtime.getRuntime().removeShutdownHook(hook);
      } catch (IllegalStateException e) {
        // the JVM is shutting down: the hook is what stopped us
      }
    }
  }

  /**
   * Blocks until the worker has stopped, for a worker run with {@link #start()}. A fetch answered 400,
   * 401, 403 or 404 (a job type the replica does not run remotely, a token it refuses) would be answered
   * the same at every retry: the worker logs it once, stops as {@link #stop()} does (running jobs finish
   * or are released) and this throws that answer. Network errors and 5xx answers are retried with backoff.
   *
   * @throws ApiException the fetch answer that stopped the worker
   */
  public void awaitStopped() throws InterruptedException, ApiException {
    stopped.await();
    ApiException e = refused;
    if (e != null) throw e;
  }

  /** The fetch answer (400, 401, 403 or 404) that stopped the worker, or null. */
  public ApiException error() {
    return refused;
  }

  /** Stops with the builder's shutdown timeout; see {@link #stop(Duration)}. */
  public void stop() {
    stop(shutdownTimeout);
  }

  @Override
  public void close() {
    stop();
  }

  /**
   * Stops fetching, lets running jobs finish for up to {@code timeout}, then cancels the rest
   * (interrupting their threads) and releases their jobs to other workers. Blocks until done; a
   * second call waits for the first.
   */
  public void stop(Duration timeout) {
    synchronized (this) {
      if (stopCalled) {
        awaitStop();
        return;
      }
      stopCalled = true;
    }
    LOG.log(Level.INFO, "worker {0}: stopping (shutdown timeout {1} ms)", workerId, timeout.toMillis());
    stopping = true;
    CompletableFuture<?> call = fetchCall;
    if (call != null) call.cancel(true);
    synchronized (runs) {
      runs.notifyAll();
    }
    join(fetchThread);
    long end = System.nanoTime() + timeout.toNanos();
    List<Run> left = new ArrayList<>();
    synchronized (runs) {
      long wait;
      while (runs.values().stream().anyMatch(r -> r.state != State.RELEASING)
          && (wait = (end - System.nanoTime()) / 1_000_000) > 0) {
        try {
          runs.wait(wait);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          break;
        }
      }
      left.addAll(runs.values());
    }
    List<Thread> releases = new ArrayList<>();
    for (Run run : left) {
      if (run.claim(State.RELEASING)) {
        run.ctx.cancel("shutdown");
        Thread t = new Thread(() -> finishAfter(run, () -> release(run)), "jobq-release");
        t.start();
        releases.add(t);
      }
    }
    releases.forEach(Worker::join);
    pool.shutdownNow();
    stopped.countDown();
    if (heartbeatThread != null) heartbeatThread.interrupt();
    join(heartbeatThread);
    LOG.log(Level.INFO, "worker {0} stopped", workerId);
  }

  private void awaitStop() {
    try {
      stopped.await();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  private static void join(Thread t) {
    if (t == null) return;
    try {
      t.join();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  // -- fetch ---------------------------------------------------------------------------------------

  private void fetchLoop() {
    List<String> types = new ArrayList<>(handlers.keySet());
    long pause = BACKOFF_FIRST_MS;
    while (!stopping) {
      int free;
      synchronized (runs) {
        while (runs.size() >= concurrency && !stopping) {
          try {
            runs.wait();
          } catch (InterruptedException e) {
            return;
          }
        }
        free = Math.min(concurrency - runs.size(), 1_000);
      }
      if (stopping) break;
      List<JsonObject> jobs;
      try {
        int max = free;
        jobs = replicas.call(c -> c.fetch(workerId, types, max, waitMs, labels, "jobq-java/" + VERSION, f -> {
          fetchCall = f;
          if (stopping) f.cancel(true);
        }), () -> stopping);
      } catch (ApiException | TransportException e) {
        if (stopping) break;
        if (e instanceof ApiException ae && FETCH_REFUSED.contains(ae.status())) {
          LOG.log(Level.ERROR, "worker {0}: fetch refused, stopping: {1}", workerId, ae.getMessage());
          refused = ae;
          Thread stopper = new Thread(this::stop, "jobq-stop");
          stopper.setDaemon(true);
          stopper.start();
          return;
        }
        LOG.log(Level.WARNING, "worker {0}: fetch failed (next try in {1} ms): {2}", workerId, pause, e.getMessage());
        synchronized (runs) {
          try {
            if (!stopping) runs.wait(pause);
          } catch (InterruptedException ie) {
            return;
          }
        }
        pause = Math.min(pause * 2, BACKOFF_MAX_MS);
        continue;
      } finally {
        fetchCall = null;
      }
      pause = BACKOFF_FIRST_MS;
      // The lease starts at the claim, which a long poll makes just before its answer: time it from the answer.
      long received = System.nanoTime();
      for (JsonObject job : jobs) startRun(job, received);
    }
  }

  private void startRun(JsonObject job, long sent) {
    Run run = new Run(new JobContext(job, replicas), job, sent);
    synchronized (runs) {
      runs.put(run.token, run);
    }
    if (stopping && run.claim(State.RELEASING)) {
      finishAfter(run, () -> release(run));
      return;
    }
    pool.execute(() -> execute(run));
  }

  // -- run and complete ----------------------------------------------------------------------------

  private void execute(Run run) {
    JobContext ctx = run.ctx;
    JsonObject body = new JsonObject();
    body.addProperty("task_token", run.token);
    ctx.enter(Thread.currentThread());
    try {
      Object output = handlers.get(ctx.jobType()).handle(ctx);
      JsonElement tree;
      try {
        tree = JsonParser.parseString(Client.gson().toJson(output));
      } catch (RuntimeException | StackOverflowError e) { // every attempt would give the same: no retry
        tree = null;
        failure(body, "output: must be JSON-serializable: " + e, false);
      }
      if (tree != null) {
        body.addProperty("outcome", "success");
        body.add("output", tree);
      }
    } catch (JobFailedException e) {
      failure(body, e.getMessage(), e.retry());
    } catch (InterruptedException e) {
      failure(body, "canceled", true);
    } catch (Exception | StackOverflowError e) {
      failure(body, e.toString(), null); // the type and message: java.lang.NumberFormatException: For input …
      LOG.log(Level.ERROR, "job " + ctx.id() + " attempt " + ctx.attempt() + ": handler threw " + e, e);
      if (!run.lost) ctx.log(traceLines(e).toArray(String[]::new));
    } finally {
      ctx.leave();
    }
    if (!run.claim(State.COMPLETING)) return; // released by the shutdown: its result is not reported
    if (run.lost) {
      LOG.log(Level.INFO, "job {0} attempt {1}: lease lost, outcome not reported", ctx.id(), ctx.attempt());
      done(run);
      return;
    }
    JsonObject sent = body;
    finishAfter(run, () -> send(run, sent));
  }

  /** The throwable's stack trace as log lines: each ≤ 4,096 bytes, ≤ 16 KiB in all, the start kept. */
  static List<String> traceLines(Throwable e) {
    StringWriter w = new StringWriter();
    e.printStackTrace(new PrintWriter(w));
    List<String> kept = new ArrayList<>();
    int total = 0;
    for (String line : w.toString().split("\\r?\\n")) {
      line = cut(line, LOG_LINE_BYTES);
      total += line.getBytes(StandardCharsets.UTF_8).length + 1;
      if (total > TRACE_LOG_BYTES) {
        kept.add("… (stack trace cut)");
        break;
      }
      kept.add(line);
    }
    return kept;
  }

  /** The start of text within limit bytes of UTF-8. */
  private static String cut(String text, int limit) {
    byte[] b = text.getBytes(StandardCharsets.UTF_8);
    if (b.length <= limit) return text;
    int n = limit;
    while (n > 0 && (b[n] & 0xC0) == 0x80) n--; // not inside a character
    return new String(b, 0, n, StandardCharsets.UTF_8);
  }

  private static void failure(JsonObject body, String error, Boolean retry) {
    body.addProperty("outcome", "failure");
    body.addProperty("error", error);
    if (retry != null) body.addProperty("retry", retry);
  }

  private void finishAfter(Run run, Runnable r) {
    try {
      r.run();
    } finally {
      done(run);
    }
  }

  private void done(Run run) {
    synchronized (runs) {
      runs.remove(run.token);
      runs.notifyAll();
    }
  }

  private void release(Run run) {
    JsonObject body = new JsonObject();
    body.addProperty("task_token", run.token);
    body.addProperty("outcome", "release");
    body.addProperty("error", "worker shutting down");
    send(run, body);
  }

  /** Sends a completion, the same body on every retry, until the lease deadline. */
  private void send(Run run, JsonObject body) {
    JobContext ctx = run.ctx;
    long delay = BACKOFF_FIRST_MS;
    while (true) {
      String outcome = body.get("outcome").getAsString();
      Exception err;
      try {
        JsonObject b = body;
        replicas.call(c -> c.complete(b));
        return;
      } catch (ApiException e) {
        if (e.status() == 409) {
          LOG.log(Level.INFO, "job {0} attempt {1}: {2} not applied: {3}", ctx.id(), ctx.attempt(), outcome, e.getMessage());
          return;
        }
        if ((e.status() == 400 || e.status() == 413) && outcome.equals("success")) {
          // The same output is refused on every attempt: no retry.
          LOG.log(Level.WARNING, "job {0} attempt {1}: output refused, reported as failure without retry: {2}",
              ctx.id(), ctx.attempt(), e.serverMessage());
          JsonObject failure = new JsonObject();
          failure.addProperty("task_token", run.token);
          failure(failure, e.serverMessage(), false);
          body = failure;
          continue;
        }
        if (!e.isRetryable()) {
          LOG.log(Level.ERROR, "job {0} attempt {1}: {2} refused: {3}", ctx.id(), ctx.attempt(), outcome, e.getMessage());
          return;
        }
        err = e;
      } catch (TransportException e) {
        err = e;
      }
      if (run.lost || System.nanoTime() + delay * 1_000_000 > run.deadline) {
        LOG.log(Level.WARNING, "job {0} attempt {1}: {2} not delivered before the lease deadline: {3}", ctx.id(), ctx.attempt(), outcome, err.getMessage());
        return;
      }
      try {
        Thread.sleep(delay);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return;
      }
      delay = Math.min(delay * 2, BACKOFF_MAX_MS);
    }
  }

  // -- heartbeat -----------------------------------------------------------------------------------

  private void heartbeatLoop() {
    while (true) {
      List<Run> held;
      synchronized (runs) {
        held = new ArrayList<>(runs.values());
      }
      long interval = held.stream().mapToLong(r -> r.heartbeatMs).min().orElse(1_000);
      try {
        Thread.sleep(interval);
      } catch (InterruptedException e) {
        return;
      }
      synchronized (runs) {
        held = runs.values().stream().filter(r -> !r.lost).toList();
      }
      for (int i = 0; i < held.size(); i += 1_000) { // at most 1,000 tokens a call
        heartbeat(held.subList(i, Math.min(i + 1_000, held.size())));
      }
    }
  }

  private void heartbeat(List<Run> held) {
    long sent = System.nanoTime();
    List<JsonObject> results;
    try {
      List<String> tokens = held.stream().map(r -> r.token).toList();
      results = replicas.call(c -> c.heartbeat(workerId, tokens));
    } catch (ApiException | TransportException e) {
      // Not a loss: the database decides. The outcome is still sent when the work ends, and the
      // replica answers 409 stale if the lease was rescued meanwhile.
      LOG.log(Level.WARNING, "worker {0}: heartbeat failed: {1}", workerId, e.getMessage());
      return;
    }
    for (int i = 0; i < held.size(); i++) {
      Run run = held.get(i);
      JsonElement s = i < results.size() ? results.get(i).get("state") : null;
      String state = s == null || s.isJsonNull() ? "" : s.getAsString();
      if (state.equals("renewed") || state.equals("cancel_requested")) {
        run.deadline = sent + run.leaseMs * 1_000_000;
      }
      if (state.equals("cancel_requested")) {
        run.ctx.cancel("cancel_requested");
      } else if (state.equals("lost")) {
        lose(run);
      }
    }
  }

  private void lose(Run run) {
    if (!run.lost) {
      run.lost = true;
      LOG.log(Level.WARNING, "job {0} attempt {1}: lost its lease: cancelling its work", run.ctx.id(), run.ctx.attempt());
    }
    run.ctx.cancel("lost");
  }

  private static String defaultWorkerId() {
    String host;
    try {
      host = InetAddress.getLocalHost().getHostName();
    } catch (Exception e) {
      host = "java";
    }
    return host + "-" + ProcessHandle.current().pid();
  }

  private enum State { RUNNING, COMPLETING, RELEASING }

  /** One fetched job held by this worker, from fetch to its completion. */
  private static final class Run {
    final JobContext ctx;
    final String token;
    final long leaseMs;
    final long heartbeatMs;
    volatile long deadline; // System.nanoTime(): the fetch answer's arrival + the lease, renewed by heartbeats
    volatile boolean lost;
    State state = State.RUNNING; // guarded by this

    Run(JobContext ctx, JsonObject job, long sent) {
      this.ctx = ctx;
      this.token = ctx.token();
      this.leaseMs = job.has("lease_ms") ? job.get("lease_ms").getAsLong() : 30_000;
      this.heartbeatMs = job.has("heartbeat_ms") ? job.get("heartbeat_ms").getAsLong() : leaseMs / 3;
      this.deadline = sent + leaseMs * 1_000_000;
    }

    synchronized boolean claim(State next) {
      if (state != State.RUNNING) return false;
      state = next;
      return true;
    }
  }

  /** Configures a {@link Worker}. */
  public static final class Builder {
    private final List<String> servers;
    private String token;
    private String workerId;
    private int concurrency = 4;
    private Duration shutdownTimeout = Duration.ofSeconds(10);
    private Map<String, String> labels = Map.of();
    private int waitMs = 20_000;
    private Client client;
    private final Map<String, JobHandler> handlers = new LinkedHashMap<>();

    private Builder(List<String> servers) {
      this.servers = servers;
    }

    /** A worker (or admin) token; none where the replica has no credentials configured. */
    public Builder token(String token) {
      this.token = token;
      return this;
    }

    /** Names the worker (owner {@code worker:<id>}). Defaults to {@code <hostname>-<pid>}. */
    public Builder workerId(String workerId) {
      this.workerId = workerId;
      return this;
    }

    /** Jobs run at once (the pool's threads). Defaults to 4. */
    public Builder concurrency(int concurrency) {
      if (concurrency < 1) throw new IllegalArgumentException("concurrency: must be at least 1, got " + concurrency);
      this.concurrency = concurrency;
      return this;
    }

    /** How long stop() lets running jobs finish before it cancels and releases them. Defaults to 10 s. */
    public Builder shutdownTimeout(Duration timeout) {
      this.shutdownTimeout = timeout;
      return this;
    }

    public Builder labels(Map<String, String> labels) {
      this.labels = labels;
      return this;
    }

    /** How long a fetch waits when nothing is due. Defaults to 20,000 ms. */
    public Builder waitMs(int waitMs) {
      this.waitMs = waitMs;
      return this;
    }

    public Builder client(Client client) {
      this.client = client;
      return this;
    }

    /** Registers the handler of one job type. */
    public Builder handler(String jobType, JobHandler handler) {
      if (handlers.putIfAbsent(jobType, handler) != null) {
        throw new IllegalArgumentException("jobType: \"" + jobType + "\" already has a handler");
      }
      return this;
    }

    public Worker build() {
      if (handlers.isEmpty()) throw new IllegalStateException("build: no handler registered");
      return new Worker(this);
    }
  }
}
