package io.github.jobq.worker;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The library against a real replica: JOBQ_TEST_SERVER names one started with --remote-type sdk-test
 * (JOBQ_TEST_TYPE overrides the type) and no credentials. Skipped when JOBQ_TEST_SERVER is unset;
 * JOBQ_SERVER is not used: it may name a replica the user did not start for the tests.
 */
class ReplicaTest {
  private static final String SERVER = System.getenv().getOrDefault("JOBQ_TEST_SERVER", "");
  private static final String TYPE = System.getenv().getOrDefault("JOBQ_TEST_TYPE", "sdk-test");
  private static final Set<String> TERMINAL = Set.of("SUCCESS", "FAILED", "CANCELED");
  private Client client;
  private Worker worker;
  private final CountDownLatch started = new CountDownLatch(1);
  private final Map<String, Map<String, JsonElement>> parentsSeen = new ConcurrentHashMap<>();

  @BeforeEach
  void setUp() {
    Assumptions.assumeTrue(!SERVER.isEmpty(),
        "JOBQ_TEST_SERVER is unset: start a replica with --remote-type sdk-test and set JOBQ_TEST_SERVER to its URL");
    client = new Client(SERVER, null);
    worker = Worker.builder(SERVER).workerId("java-test-" + UUID.randomUUID().toString().substring(0, 8))
        .concurrency(4).shutdownTimeout(Duration.ofSeconds(2)).waitMs(1_000)
        .handler(TYPE, this::handle).build();
  }

  private Object handle(JobContext ctx) throws Exception {
    started.countDown();
    Map<String, JsonElement> outputs = new HashMap<>();
    ctx.parents().forEach((key, parent) -> outputs.put(key, parent.get("output")));
    parentsSeen.put(ctx.jobKey(), outputs);
    JsonObject p = ctx.params();
    switch (p.get("action").getAsString()) {
      case "succeed":
        ctx.log("line one", "line two");
        ctx.progress(0.5, "half way");
        return p.get("output");
      case "fail":
        throw new JobFailedException(p.get("error").getAsString(), false);
      default:
        ctx.sleep(Duration.ofSeconds(30));
        return Map.of("never", true);
    }
  }

  private JsonObject submit(Map<String, Object> params) throws Exception {
    return client.submit(TYPE, params, Client.SubmitOptions.defaults().withMaxRetry(0));
  }

  /** Polls the API: the replica offers no push for a job's status over HTTP. */
  private JsonObject waitStatus(long id, Set<String> statuses) throws Exception {
    long end = System.currentTimeMillis() + 30_000;
    JsonObject got = null;
    while (System.currentTimeMillis() < end) {
      got = client.getJob(id);
      if (statuses.contains(got.get("status").getAsString())) return got;
      Thread.sleep(50);
    }
    return fail("job " + id + " did not reach " + statuses + ": " + got);
  }

  @Test
  void successFailureAndSubmit() throws Exception {
    long ok = submit(Map.of("action", "succeed", "output", Map.of("ip", "10.0.0.7"))).get("id").getAsLong();
    long bad = submit(Map.of("action", "fail", "error", "quota exceeded")).get("id").getAsLong();
    try (Worker w = worker) {
      w.start();
      assertEquals("SUCCESS", waitStatus(ok, TERMINAL).get("status").getAsString());
      JsonObject failed = waitStatus(bad, TERMINAL);
      assertEquals("FAILED", failed.get("status").getAsString());
      assertTrue(failed.get("last_error").getAsString().contains("quota exceeded"));
    }
  }

  @Test
  void cancelReachesARunningJob() throws Exception {
    long id = submit(Map.of("action", "block")).get("id").getAsLong();
    try (Worker w = worker) {
      w.start();
      assertTrue(started.await(10, TimeUnit.SECONDS));
      client.cancelJob(id);
      assertEquals("CANCELED", waitStatus(id, TERMINAL).get("status").getAsString());
    }
  }

  @Test
  void shutdownReleasesRunningWork() throws Exception {
    long id = submit(Map.of("action", "block")).get("id").getAsLong();
    worker.start();
    assertTrue(started.await(10, TimeUnit.SECONDS));
    worker.stop(Duration.ofMillis(200));
    JsonObject got = client.getJob(id);
    assertEquals("WAITING", got.get("status").getAsString());
    assertEquals(0, got.get("retry_times").getAsInt());
    client.cancelJob(id);
  }

  @Test
  void aDeadReplicaInTheListIsSkipped() throws Exception {
    String dead;
    try (java.net.ServerSocket s = new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
      dead = "http://127.0.0.1:" + s.getLocalPort();
    }
    long[] ids = new long[3];
    for (int i = 0; i < ids.length; i++) {
      ids[i] = submit(Map.of("action", "succeed", "output", Map.of("n", i))).get("id").getAsLong();
    }
    try (Worker w = Worker.builder(java.util.List.of(dead, SERVER)).workerId("java-test-" + UUID.randomUUID().toString().substring(0, 8))
        .shutdownTimeout(Duration.ofSeconds(2)).waitMs(1_000).handler(TYPE, this::handle).build()) {
      w.start();
      for (int i = 0; i < ids.length; i++) {
        JsonObject got = waitStatus(ids[i], TERMINAL);
        assertEquals("SUCCESS", got.get("status").getAsString());
        assertEquals(i, got.getAsJsonObject("output").get("n").getAsInt());
      }
    }
  }

  @Test
  void anExceptionIsRecordedWithItsType() throws Exception {
    long id = submit(Map.of("action", "crash", "cpus", "many")).get("id").getAsLong();
    try (Worker w = Worker.builder(SERVER).workerId("java-test-" + UUID.randomUUID().toString().substring(0, 8))
        .shutdownTimeout(Duration.ofSeconds(2)).waitMs(1_000)
        .handler(TYPE, ctx -> Integer.parseInt(ctx.params().get("cpus").getAsString())).build()) {
      w.start();
      JsonObject got = waitStatus(id, TERMINAL);
      assertEquals("FAILED", got.get("status").getAsString());
      assertEquals("java.lang.NumberFormatException: For input string: \"many\"", got.get("last_error").getAsString());
    }
  }

  @Test
  void workflowChildReadsItsParentOutput() throws Exception {
    String key = "java-wf-" + UUID.randomUUID().toString().substring(0, 8);
    JsonObject wf = client.submitWorkflow(key, List.of(
        Map.of("job_key", key + "-a", "job_type", TYPE, "max_retry", 0,
            "params", Map.of("action", "succeed", "output", Map.of("from", key + "-a"))),
        Map.of("job_key", key + "-b", "job_type", TYPE, "max_retry", 0,
            "params", Map.of("action", "succeed"), "depends_on", List.of(key + "-a"))));
    assertEquals("WAITING", wf.getAsJsonArray("jobs").get(0).getAsJsonObject().get("status").getAsString());
    assertEquals("BLOCKED", wf.getAsJsonArray("jobs").get(1).getAsJsonObject().get("status").getAsString());
    try (Worker w = worker) {
      w.start();
      long end = System.currentTimeMillis() + 30_000;
      while (System.currentTimeMillis() < end && "RUNNING".equals(client.getWorkflow(key).get("status").getAsString())) {
        Thread.sleep(50);
      }
      assertEquals("SUCCESS", client.getWorkflow(key).get("status").getAsString());
    }
    JsonObject from = new JsonObject();
    from.addProperty("from", key + "-a");
    assertEquals(Map.of(key + "-a", from), parentsSeen.get(key + "-b"));
  }

  @Test
  void badSubmitNamesTheField() {
    ApiException e = assertThrows(ApiException.class,
        () -> client.submit(TYPE, Map.of(), Client.SubmitOptions.defaults().withPriority(5000)));
    assertEquals(400, e.status());
    assertEquals("priority", e.field());
  }
}
