package io.github.jobq.worker;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** The worker's protocol rules (docs/workers.md, "What a worker library does") against a scripted stub. */
class WorkerRulesTest {
  private static final String COMPLETE = "/v1/workers/complete";
  private Stub stub;

  @BeforeEach
  void setUp() throws Exception {
    stub = new Stub();
  }

  @AfterEach
  void tearDown() {
    stub.close();
  }

  private Worker worker(JobHandler h, int concurrency, Duration shutdown) {
    return Worker.builder(stub.url()).workerId("test-1").concurrency(concurrency)
        .shutdownTimeout(shutdown).waitMs(100).handler("t", h).build();
  }

  private void serve(String... jobs) {
    Stub.Answer[] list = new Stub.Answer[jobs.length + 1];
    for (int i = 0; i < jobs.length; i++) list[i] = Stub.jobs(jobs[i]);
    list[jobs.length] = Stub.idle();
    stub.script("/v1/workers/fetch", list);
  }

  private static JsonObject json(String s) {
    return JsonParser.parseString(s).getAsJsonObject();
  }

  @Test
  void completionIsRetriedWithTheSameBodyUntilApplied() throws Exception {
    serve(Stub.job(1, 10_000));
    Stub.Answer unavailable = Stub.of(503, "{\"error\":{\"code\":\"unavailable\",\"message\":\"db\"}}");
    stub.script(COMPLETE, unavailable, unavailable,
        Stub.of(200, "{\"result\":\"applied\",\"job_id\":1,\"attempt\":1,\"status\":\"SUCCESS\"}"));
    try (Worker w = worker(ctx -> Map.of("ip", "10.0.0.7"), 2, Duration.ofSeconds(5))) {
      w.start();
      assertTrue(stub.waitFor(Stub.count(COMPLETE, 3), 10_000));
    }
    JsonObject want = json("{\"task_token\":\"jqt1.1.1.secret\",\"outcome\":\"success\",\"output\":{\"ip\":\"10.0.0.7\"}}");
    assertEquals(List.of(want, want, want), stub.bodies(COMPLETE));
  }

  @Test
  void staleEndsTheRetries() throws Exception {
    serve(Stub.job(2, 10_000));
    stub.script(COMPLETE, Stub.of(409, "{\"error\":{\"code\":\"stale\",\"field\":\"task_token\",\"message\":\"stale\"}}"));
    try (Worker w = worker(ctx -> {
      throw new JobFailedException("boom", false);
    }, 2, Duration.ofSeconds(5))) {
      w.start();
      assertTrue(stub.waitFor(Stub.count(COMPLETE, 1), 10_000));
    }
    assertEquals(List.of(json("{\"task_token\":\"jqt1.2.1.secret\",\"outcome\":\"failure\",\"error\":\"boom\",\"retry\":false}")),
        stub.bodies(COMPLETE));
  }

  @Test
  void refusedOutputIsReportedAsAFailure() throws Exception {
    serve(Stub.job(3, 10_000));
    String msg = "output: must be at most 65536 bytes, got 70000";
    stub.script(COMPLETE, Stub.of(413, "{\"error\":{\"code\":\"too_large\",\"field\":\"output\",\"message\":\"" + msg + "\"}}"),
        Stub.of(200, "{\"result\":\"applied\",\"job_id\":3,\"attempt\":1,\"status\":\"SCHEDULED\"}"));
    try (Worker w = worker(ctx -> Map.of("data", "x".repeat(70_000)), 2, Duration.ofSeconds(5))) {
      w.start();
      assertTrue(stub.waitFor(Stub.count(COMPLETE, 2), 10_000));
    }
    assertEquals(json("{\"task_token\":\"jqt1.3.1.secret\",\"outcome\":\"failure\",\"error\":\"" + msg + "\",\"retry\":false}"),
        stub.bodies(COMPLETE).get(1));
  }

  @Test
  void unserializableOutputFailsWithoutRetry() throws Exception {
    serve(Stub.job(9, 10_000));
    try (Worker w = worker(ctx -> Map.of("x", Double.NaN), 2, Duration.ofSeconds(5))) {
      w.start();
      assertTrue(stub.waitFor(Stub.count(COMPLETE, 1), 10_000));
    }
    JsonObject body = stub.bodies(COMPLETE).get(0);
    assertEquals("failure", body.get("outcome").getAsString());
    assertEquals(false, body.get("retry").getAsBoolean());
    assertTrue(body.get("error").getAsString().startsWith("output: must be JSON-serializable: java.lang.IllegalArgumentException: NaN"),
        body.get("error").getAsString());
  }

  /** Records what the worker logs to jobq.worker (System.Logger's default backend is java.util.logging). */
  private static final class Recorder extends java.util.logging.Handler implements AutoCloseable {
    final List<java.util.logging.LogRecord> records = new CopyOnWriteArrayList<>();
    private final java.util.logging.Logger logger = java.util.logging.Logger.getLogger("jobq.worker");

    Recorder() {
      logger.addHandler(this);
    }

    @Override
    public void publish(java.util.logging.LogRecord r) {
      records.add(r);
    }

    @Override
    public void flush() {}

    @Override
    public void close() {
      logger.removeHandler(this);
    }

    String text() {
      return records.stream().map(r -> java.text.MessageFormat.format(r.getMessage(), r.getParameters())
          + (r.getThrown() != null ? " thrown=" + r.getThrown() : "")).collect(Collectors.joining("\n"));
    }
  }

  @Test
  void anExceptionGivesItsTypeAndItsStackTrace() throws Exception {
    serve(Stub.job(10, 10_000));
    try (Recorder rec = new Recorder()) {
      try (Worker w = worker(ctx -> Integer.parseInt("many"), 2, Duration.ofSeconds(5))) {
        w.start();
        assertTrue(stub.waitFor(Stub.count(COMPLETE, 1), 10_000));
      }
      String want = "java.lang.NumberFormatException: For input string: \"many\"";
      assertEquals(want, stub.bodies(COMPLETE).get(0).get("error").getAsString());
      List<String> lines = stub.bodies("/v1/workers/log").stream()
          .flatMap(b -> b.getAsJsonArray("lines").asList().stream().map(l -> l.getAsString())).toList();
      assertEquals(want, lines.get(0));
      assertTrue(lines.get(1).startsWith("\tat java.base/java.lang.NumberFormatException"), lines.get(1));
      String logged = rec.text();
      assertTrue(logged.contains("thrown=" + want), logged);
      assertTrue(logged.contains("worker test-1 started: job_types=t concurrency=2 replicas=" + stub.url()), logged);
      assertTrue(logged.endsWith("worker test-1 stopped"), logged);
    }
  }

  @Test
  void aStackTraceInTheLogIsBounded() {
    Exception e = new IllegalStateException("é".repeat(5_000));
    StackTraceElement[] deep = new StackTraceElement[2_000];
    for (int i = 0; i < deep.length; i++) deep[i] = new StackTraceElement("C", "m" + i, "C.java", i);
    e.setStackTrace(deep);
    List<String> lines = Worker.traceLines(e);
    int total = 0;
    for (String l : lines) {
      int n = l.getBytes(java.nio.charset.StandardCharsets.UTF_8).length;
      assertTrue(n <= 4_096, "line of " + n + " bytes");
      total += n + 1;
    }
    assertTrue(total <= 16_384 + 64, "trace of " + total + " bytes");
    assertTrue(lines.get(0).startsWith("java.lang.IllegalStateException: ééé"));
    assertEquals("… (stack trace cut)", lines.get(lines.size() - 1));
  }

  @Test
  void aDeadReplicaFirstInTheListIsSkipped() throws Exception {
    String dead;
    try (java.net.ServerSocket s = new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
      dead = "http://127.0.0.1:" + s.getLocalPort();
    }
    serve(Stub.job(12, 10_000));
    try (Recorder rec = new Recorder()) {
      try (Worker w = Worker.builder(List.of(dead, stub.url())).workerId("test-1").waitMs(100)
          .handler("t", ctx -> Map.of("ok", true)).build()) {
        w.start();
        assertTrue(stub.waitFor(Stub.count(COMPLETE, 1), 10_000));
      }
      assertEquals(json("{\"ok\":true}"), stub.bodies(COMPLETE).get(0).get("output"));
      assertTrue(rec.text().contains("replica " + dead + " unreachable; moving to " + stub.url()), rec.text());
    }
  }

  @Test
  void cancelRequestedInterruptsTheWork() throws Exception {
    serve(Stub.job(4, 50));
    stub.script("/v1/workers/heartbeat", Stub.of(200, "{\"results\":[{\"job_id\":4,\"attempt\":1,\"state\":\"cancel_requested\"}]}"));
    List<String> reasons = new CopyOnWriteArrayList<>();
    try (Worker w = worker(ctx -> {
      try {
        Thread.sleep(10_000);
      } catch (InterruptedException e) {
        reasons.add(ctx.cancelReason());
      }
      ctx.throwIfCancelled();
      return null;
    }, 2, Duration.ofSeconds(5))) {
      w.start();
      assertTrue(stub.waitFor(Stub.count(COMPLETE, 1), 10_000));
    }
    assertEquals(List.of("cancel_requested"), reasons);
    assertEquals(List.of(json("{\"task_token\":\"jqt1.4.1.secret\",\"outcome\":\"failure\",\"error\":\"canceled\",\"retry\":true}")),
        stub.bodies(COMPLETE));
  }

  @Test
  void lostLeaseCancelsAndNeverCompletes() throws Exception {
    serve(Stub.job(5, 50));
    stub.script("/v1/workers/heartbeat", Stub.of(200, "{\"results\":[{\"job_id\":5,\"attempt\":1,\"state\":\"lost\"}]}"));
    CountDownLatch ended = new CountDownLatch(1);
    List<String> reasons = new CopyOnWriteArrayList<>();
    try (Worker w = worker(ctx -> {
      while (!ctx.isCancelled()) {
        try {
          Thread.sleep(10_000);
        } catch (InterruptedException e) {
          // checked by the loop
        }
      }
      reasons.add(ctx.cancelReason());
      ended.countDown();
      return Map.of("late", true);
    }, 2, Duration.ofSeconds(5))) {
      w.start();
      assertTrue(ended.await(10, TimeUnit.SECONDS));
    }
    assertEquals(List.of("lost"), reasons);
    assertEquals(List.of(), stub.bodies(COMPLETE));
  }

  @Test
  void fetchAsksForFreeSlotsOnly() throws Exception {
    serve(Stub.job(6, 10_000));
    CountDownLatch release = new CountDownLatch(1);
    try (Worker w = worker(ctx -> {
      release.await();
      return null;
    }, 2, Duration.ofSeconds(5))) {
      w.start();
      assertTrue(stub.waitFor(Stub.count("/v1/workers/fetch", 3), 10_000));
      List<JsonObject> fetches = stub.bodies("/v1/workers/fetch");
      assertEquals(2, fetches.get(0).get("max_jobs").getAsInt());
      assertEquals(Set.of(1), fetches.subList(1, fetches.size()).stream()
          .map(f -> f.get("max_jobs").getAsInt()).collect(Collectors.toSet()));
      assertEquals("test-1", fetches.get(0).get("worker_id").getAsString());
      release.countDown();
    }
  }

  @Test
  void shutdownReleasesUnfinishedWork() throws Exception {
    serve(Stub.job(7, 10_000), Stub.job(8, 10_000));
    CountDownLatch started = new CountDownLatch(2);
    Worker w = worker(ctx -> {
      started.countDown();
      if (ctx.id() == 7) return Map.of("quick", true);
      while (!ctx.isCancelled()) {
        try {
          Thread.sleep(10_000);
        } catch (InterruptedException e) {
          // checked by the loop
        }
      }
      throw new CancelledException(ctx.cancelReason());
    }, 2, Duration.ofMillis(300));
    w.start();
    assertTrue(started.await(10, TimeUnit.SECONDS));
    w.stop();
    Map<String, JsonObject> byToken = stub.bodies(COMPLETE).stream()
        .collect(Collectors.toMap(b -> b.get("task_token").getAsString(), b -> b));
    assertEquals("success", byToken.get("jqt1.7.1.secret").get("outcome").getAsString());
    assertEquals(json("{\"task_token\":\"jqt1.8.1.secret\",\"outcome\":\"release\",\"error\":\"worker shutting down\"}"),
        byToken.get("jqt1.8.1.secret"));
    assertEquals(2, stub.bodies(COMPLETE).size());
  }

  @Test
  void refusedFetchStopsTheWorkerAndRunThrows() throws Exception {
    stub.script("/v1/workers/fetch", Stub.jobs(Stub.job(20, 10_000)),
        Stub.of(400, "{\"error\":{\"code\":\"invalid_argument\",\"field\":\"job_types\","
            + "\"message\":\"\\\"t\\\" is not a remote job type\"}}"));
    Worker w = worker(ctx -> {
      Thread.sleep(300);
      return Map.of("done", true);
    }, 2, Duration.ofSeconds(5));
    ApiException e = org.junit.jupiter.api.Assertions.assertThrows(ApiException.class, w::run);
    assertEquals(400, e.status());
    assertTrue(e.getMessage().contains("not a remote job type"), e.getMessage());
    assertEquals(e, w.error());
    assertEquals(2, stub.bodies("/v1/workers/fetch").size(), "the refused fetch is not retried");
    assertEquals(List.of(json("{\"task_token\":\"jqt1.20.1.secret\",\"outcome\":\"success\",\"output\":{\"done\":true}}")),
        stub.bodies(COMPLETE));
  }

  @Test
  void unavailableFetchIsRetried() throws Exception {
    Stub.Answer unavailable = Stub.of(503, "{\"error\":{\"code\":\"unavailable\",\"message\":\"db\"}}");
    stub.script("/v1/workers/fetch", unavailable, unavailable, Stub.idle());
    try (Worker w = worker(ctx -> Map.of(), 2, Duration.ofSeconds(5))) {
      w.start();
      assertTrue(stub.waitFor(Stub.count("/v1/workers/fetch", 4), 10_000));
      assertEquals(null, w.error());
    }
  }
}
