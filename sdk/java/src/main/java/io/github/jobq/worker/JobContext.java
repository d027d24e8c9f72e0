package io.github.jobq.worker;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import java.lang.System.Logger.Level;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * What a handler gets: the job, its cancellation state, and the attempt's log and progress.
 *
 * <p>The job is cancelled when its cancel is requested, its lease is lost, or the worker's shutdown
 * timeout runs out: {@link #isCancelled()} turns true and the handler's thread is interrupted, so
 * blocking calls throw {@link InterruptedException}.
 */
public final class JobContext {
  private static final System.Logger LOG = System.getLogger("jobq.worker");
  private final JsonObject job;
  private final String token;
  private final Replicas replicas;
  private volatile String cancelReason;
  private Thread thread; // the handler's thread while it runs; guarded by this

  JobContext(JsonObject job, Replicas replicas) {
    this.job = job;
    this.token = job.get("task_token").getAsString();
    this.replicas = replicas;
  }

  /** The job as the replica handed it out (without its task token). */
  public JsonObject job() {
    JsonObject copy = job.deepCopy();
    copy.remove("task_token");
    return copy;
  }

  public long id() {
    return job.get("id").getAsLong();
  }

  public String jobKey() {
    return job.has("job_key") ? job.get("job_key").getAsString() : "";
  }

  public String jobType() {
    return job.get("job_type").getAsString();
  }

  public int attempt() {
    return job.has("attempt") ? job.get("attempt").getAsInt() : 0;
  }

  /** The job's params; an empty object when it has none. */
  public JsonObject params() {
    JsonElement p = job.get("params");
    return p != null && p.isJsonObject() ? p.getAsJsonObject() : new JsonObject();
  }

  /** The job's params decoded into {@code type} with Gson. */
  public <T> T params(Class<T> type) {
    return Client.gson().fromJson(params(), type);
  }

  /**
   * A workflow job's parents as the fetch answered them, by job_key: each {@code job_id},
   * {@code job_key}, {@code status} and {@code output} (the output of the attempt that succeeded, or
   * JSON null). Empty for a job outside a workflow or without parents.
   */
  public Map<String, JsonObject> parents() {
    Map<String, JsonObject> out = new LinkedHashMap<>();
    JsonElement ps = job.get("parents");
    if (ps != null && ps.isJsonArray()) {
      for (JsonElement e : ps.getAsJsonArray()) {
        if (!e.isJsonObject()) continue;
        JsonObject p = e.getAsJsonObject();
        JsonElement key = p.get("job_key");
        out.put(key == null || key.isJsonNull() ? "" : key.getAsString(), p.deepCopy());
      }
    }
    return Collections.unmodifiableMap(out);
  }

  /** The recorded output of the parent whose job_key is {@code jobKey}; null when it has none or is no parent. */
  public JsonElement parentOutput(String jobKey) {
    JsonObject p = parents().get(jobKey);
    JsonElement out = p == null ? null : p.get("output");
    return out == null || out.isJsonNull() ? null : out;
  }

  public boolean isCancelled() {
    return cancelReason != null;
  }

  /** Why the work must stop: "cancel_requested", "lost" or "shutdown"; null while it may go on. */
  public String cancelReason() {
    return cancelReason;
  }

  public void throwIfCancelled() throws CancelledException {
    String reason = cancelReason;
    if (reason != null) throw new CancelledException(reason);
  }

  /** Sleeps for {@code d}, throwing {@link CancelledException} as soon as the job is cancelled. */
  public void sleep(Duration d) throws CancelledException {
    try {
      Thread.sleep(d.toMillis());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    throwIfCancelled();
    if (Thread.currentThread().isInterrupted()) throw new CancelledException("interrupted");
  }

  /** Appends lines to this attempt's log; a log that cannot be written is logged, not thrown. */
  public void log(String... lines) {
    List<String> split = new ArrayList<>();
    for (String line : lines) split.addAll(List.of(String.valueOf(line).split("\n", -1)));
    if (split.isEmpty()) return;
    try {
      replicas.call(c -> {
        c.appendLog(token, split);
        return null;
      });
    } catch (ApiException | TransportException e) {
      LOG.log(Level.WARNING, "job {0} attempt {1}: log not written: {2}", id(), attempt(), e.getMessage());
    }
  }

  /** Reports this attempt's progress (0–1) and a message; the replica keeps the last report. */
  public void progress(double progress, String message) {
    try {
      replicas.call(c -> {
        c.reportProgress(token, progress, message);
        return null;
      });
    } catch (ApiException | TransportException e) {
      LOG.log(Level.WARNING, "job {0} attempt {1}: progress not written: {2}", id(), attempt(), e.getMessage());
    }
  }

  @Override
  public String toString() { // never shows the task token
    return "JobContext[id=" + id() + ", jobType=" + jobType() + ", attempt=" + attempt() + "]";
  }

  String token() {
    return token;
  }

  synchronized void enter(Thread t) {
    thread = t;
    if (cancelReason != null) t.interrupt();
  }

  /** Clears the handler's thread and any interrupt meant for it, so the pool thread is clean. */
  synchronized void leave() {
    thread = null;
    Thread.interrupted();
  }

  synchronized void cancel(String reason) {
    if (cancelReason != null) return;
    cancelReason = reason;
    if (thread != null) thread.interrupt();
  }
}
