package io.github.jobq.conformance;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import io.github.jobq.worker.ApiException;
import io.github.jobq.worker.CancelledException;
import io.github.jobq.worker.JobContext;
import io.github.jobq.worker.JobFailedException;
import io.github.jobq.worker.Worker;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import sun.misc.Signal;

/**
 * The conformance worker of docs/workers.md, run by jobq's conformance suite through
 * sdk/java/conformance-worker.sh. Reads its settings from the environment; on SIGTERM or SIGINT it
 * shuts down gracefully and exits 0.
 */
public final class ConformanceWorker {
  private ConformanceWorker() {}

  static Object handle(JobContext ctx) throws Exception {
    JsonObject p = ctx.params();
    String action = p.has("action") ? p.get("action").getAsString() : "";
    switch (action) {
      case "succeed":
        return p.get("output");
      case "fail":
        boolean retry = !p.has("retry") || !p.get("retry").isJsonPrimitive() || p.get("retry").getAsBoolean();
        throw new JobFailedException(p.has("error") ? p.get("error").getAsString() : "", retry);
      case "sleep": {
        long ms = p.has("ms") ? p.get("ms").getAsLong() : 0;
        ctx.sleep(Duration.ofMillis(ms));
        return Map.of("slept", ms);
      }
      case "block":
        while (!ctx.isCancelled()) {
          try {
            Thread.sleep(60_000);
          } catch (InterruptedException e) {
            // cancelled: checked by the loop
          }
        }
        throw new CancelledException(ctx.cancelReason());
      case "log": {
        List<String> lines = new ArrayList<>();
        if (p.has("lines")) for (JsonElement l : p.getAsJsonArray("lines")) lines.add(l.getAsString());
        if (!lines.isEmpty()) ctx.log(lines.toArray(new String[0]));
        if (p.has("progress")) {
          ctx.progress(p.get("progress").getAsDouble(), p.has("message") ? p.get("message").getAsString() : "");
        }
        return Map.of("logged", lines.size());
      }
      case "big_output": {
        int n = p.has("bytes") ? p.get("bytes").getAsInt() : 0;
        return Map.of("data", "x".repeat(n));
      }
      default:
        throw new JobFailedException("params.action: unknown action \"" + action + "\"", false);
    }
  }

  private static void usage(String message) {
    System.err.println(message);
    System.exit(2);
  }

  private static int envInt(String name, int fallback) {
    String raw = System.getenv().getOrDefault(name, "");
    if (raw.isEmpty()) return fallback;
    if (!raw.matches("\\d{1,9}")) usage(name + ": must be a non-negative integer, got \"" + raw + "\"");
    return Integer.parseInt(raw);
  }

  public static void main(String[] args) throws InterruptedException {
    String server = System.getenv().getOrDefault("JOBQ_SERVER", "");
    if (server.isEmpty()) usage("JOBQ_SERVER: must be set to the replica's base URL");
    int concurrency = envInt("JOBQ_CONCURRENCY", 4);
    if (concurrency < 1) usage("JOBQ_CONCURRENCY: must be at least 1");
    String types = System.getenv().getOrDefault("JOBQ_TYPES", "");
    Worker worker = null;
    try {
      Worker.Builder b = Worker.builder(server)
          .token(System.getenv("JOBQ_WORKER_TOKEN"))
          .workerId(System.getenv("JOBQ_WORKER_ID"))
          .concurrency(concurrency)
          .shutdownTimeout(Duration.ofMillis(envInt("JOBQ_SHUTDOWN_TIMEOUT_MS", 10_000)));
      for (String t : (types.isBlank() ? "conformance" : types).split(",")) {
        if (!t.isBlank()) b.handler(t.strip(), ConformanceWorker::handle);
      }
      worker = b.build();
    } catch (IllegalArgumentException e) {
      usage(e.getMessage());
    }
    CountDownLatch stop = new CountDownLatch(1);
    Signal.handle(new Signal("TERM"), s -> stop.countDown());
    Signal.handle(new Signal("INT"), s -> stop.countDown());
    Worker started = worker;
    Thread refusal = new Thread(() -> {
      try {
        started.awaitStopped();
      } catch (ApiException e) {
        System.err.println("worker stopped: " + e.getMessage());
        System.exit(1);
      } catch (InterruptedException e) {
        // main exits
      }
    }, "refusal");
    refusal.setDaemon(true);
    worker.start();
    refusal.start();
    stop.await();
    worker.stop();
    System.exit(0);
  }
}
