package io.github.jobq.worker;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** Workflow submits and a workflow job's parents (docs/workflows.md) against a scripted stub. */
class WorkflowTest {
  private Stub stub;

  @BeforeEach
  void setUp() throws Exception {
    stub = new Stub();
  }

  @AfterEach
  void tearDown() {
    stub.close();
  }

  private static JsonObject json(String s) {
    return JsonParser.parseString(s).getAsJsonObject();
  }

  @Test
  void submitWorkflowSendsTheJobsInOneRequest() throws Exception {
    String answer = "{\"workflow_key\":\"release-1\",\"status\":\"RUNNING\",\"jobs\":[{\"id\":1,\"status\":\"WAITING\"},"
        + "{\"id\":2,\"status\":\"BLOCKED\",\"blocked_parents\":1}]}";
    stub.script("/v1/workflows", Stub.of(201, answer));
    Client client = new Client(stub.url(), null);
    JsonObject got = client.submitWorkflow("release-1", List.of(
        Map.of("job_key", "build-1", "job_type", "build", "params", Map.of("ref", "v1")),
        Map.of("job_key", "deploy-1", "job_type", "deploy",
            "depends_on", List.of(Map.of("job_key", "build-1", "on_parent_failure", "run")))));
    assertEquals(json(answer), got);
    assertEquals(List.of(json("{\"workflow_key\":\"release-1\",\"jobs\":["
        + "{\"job_key\":\"build-1\",\"job_type\":\"build\",\"params\":{\"ref\":\"v1\"}},"
        + "{\"job_key\":\"deploy-1\",\"job_type\":\"deploy\","
        + "\"depends_on\":[{\"job_key\":\"build-1\",\"on_parent_failure\":\"run\"}]}]}")),
        stub.bodies("/v1/workflows"));
  }

  @Test
  void refusedWorkflowNamesTheEdge() {
    stub.script("/v1/workflows", Stub.of(400, "{\"error\":{\"code\":\"invalid\",\"field\":\"jobs[1].depends_on[0]\","
        + "\"message\":\"the edge \\\"b\\\" → \\\"a\\\" is on a cycle\"}}"));
    Client client = new Client(stub.url(), null);
    ApiException e = assertThrows(ApiException.class, () -> client.submitWorkflow("w", List.of(
        Map.of("job_key", "a", "job_type", "t", "depends_on", List.of("b")),
        Map.of("job_key", "b", "job_type", "t", "depends_on", List.of("a")))));
    assertEquals(400, e.status());
    assertEquals("jobs[1].depends_on[0]", e.field());
  }

  @Test
  void getWorkflowEscapesTheKey() throws Exception {
    String key = "nightly@2026-01-02T02:00:00Z/build a";
    stub.script("/v1/workflows/" + key, Stub.of(200, "{\"workflow_key\":\"x\",\"status\":\"SUCCESS\"}"));
    JsonObject got = new Client(stub.url(), null).getWorkflow(key);
    assertEquals("SUCCESS", got.get("status").getAsString());
    assertTrue(stub.waitFor(Stub.count("/v1/workflows/" + key, 1), 1_000));
  }

  @Test
  void handlerReadsItsParents() throws Exception {
    String job = "{\"id\":9,\"job_key\":\"deploy-1\",\"job_type\":\"t\",\"params\":{},\"attempt\":1,"
        + "\"lease_ms\":30000,\"heartbeat_ms\":10000,\"task_token\":\"jqt1.9.1.secret\",\"parents\":["
        + "{\"job_id\":7,\"job_key\":\"build-1\",\"status\":\"SUCCESS\",\"output\":{\"artifact\":\"a.tgz\"}},"
        + "{\"job_id\":8,\"job_key\":\"lint-1\",\"status\":\"FAILED\",\"output\":null}]}";
    stub.script("/v1/workers/fetch", Stub.jobs(job), Stub.idle());
    Map<String, Object> seen = new ConcurrentHashMap<>();
    try (Worker w = Worker.builder(stub.url()).workerId("test-1").concurrency(1).shutdownTimeout(Duration.ofSeconds(5))
        .waitMs(100).handler("t", ctx -> {
          seen.put("keys", List.copyOf(ctx.parents().keySet()));
          seen.put("build", ctx.parentOutput("build-1"));
          seen.put("lint status", ctx.parents().get("lint-1").get("status").getAsString());
          seen.put("lint output", String.valueOf(ctx.parentOutput("lint-1")));
          seen.put("none", String.valueOf(ctx.parentOutput("test-1")));
          return null;
        }).build()) {
      w.start();
      assertTrue(stub.waitFor(Stub.count("/v1/workers/complete", 1), 10_000));
    }
    assertEquals(List.of("build-1", "lint-1"), seen.get("keys"));
    assertEquals(json("{\"artifact\":\"a.tgz\"}"), seen.get("build"));
    assertEquals("FAILED", seen.get("lint status"));
    assertEquals("null", seen.get("lint output"));
    assertEquals("null", seen.get("none"));
  }

  @Test
  void aJobOutsideAWorkflowHasNoParents() {
    JobContext ctx = new JobContext(json(Stub.job(1, 10_000)), new Replicas(List.of(new Client(stub.url(), null)), List.of(stub.url())));
    assertEquals(Map.of(), ctx.parents());
    JsonElement none = ctx.parentOutput("build-1");
    assertNull(none);
  }
}
