package io.github.jobq.worker;

import com.google.gson.Gson;
import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.function.Consumer;

/** Calls one jobq replica over HTTP/JSON. Safe to share between threads. */
public final class Client {
  private static final Gson GSON = new Gson();
  private final String base;
  private final String token;
  private final Duration timeout;
  private final HttpClient http;

  /**
   * @param server the replica's base URL, e.g. {@code http://127.0.0.1:8080}
   * @param token a worker or admin bearer token, or null where the replica has no credentials
   */
  public Client(String server, String token) {
    this(server, token, Duration.ofSeconds(10));
  }

  public Client(String server, String token, Duration timeout) {
    URI uri;
    try {
      uri = URI.create(server);
    } catch (IllegalArgumentException e) {
      uri = null;
    }
    if (uri == null || uri.getHost() == null
        || !("http".equals(uri.getScheme()) || "https".equals(uri.getScheme()))) {
      throw new IllegalArgumentException("server: must be an http:// or https:// URL, got \"" + server + "\"");
    }
    this.base = server.replaceAll("/+$", "");
    this.token = token == null || token.isEmpty() ? null : token;
    this.timeout = timeout;
    this.http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).connectTimeout(timeout).build();
  }

  /** Options of a submit; null fields take the server's defaults. */
  public record SubmitOptions(String jobKey, Integer priority, Integer maxRetry, String runAt, Integer timeoutMs) {
    public static SubmitOptions defaults() {
      return new SubmitOptions(null, null, null, null, null);
    }

    public SubmitOptions withJobKey(String key) {
      return new SubmitOptions(key, priority, maxRetry, runAt, timeoutMs);
    }

    public SubmitOptions withMaxRetry(int n) {
      return new SubmitOptions(jobKey, priority, n, runAt, timeoutMs);
    }

    public SubmitOptions withPriority(int p) {
      return new SubmitOptions(jobKey, p, maxRetry, runAt, timeoutMs);
    }
  }

  /** Submits one job (job_key defaults to a random UUID) and returns it as the API answers. */
  public JsonObject submit(String jobType, Object params, SubmitOptions options)
      throws ApiException, TransportException {
    JsonObject body = new JsonObject();
    body.addProperty("job_key", options.jobKey() != null ? options.jobKey() : UUID.randomUUID().toString());
    body.addProperty("job_type", jobType);
    if (params != null) body.add("params", GSON.toJsonTree(params));
    if (options.priority() != null) body.addProperty("priority", options.priority());
    if (options.maxRetry() != null) body.addProperty("max_retry", options.maxRetry());
    if (options.runAt() != null) body.addProperty("run_at", options.runAt());
    if (options.timeoutMs() != null) body.addProperty("timeout_ms", options.timeoutMs());
    return call("POST", "/v1/jobs", body, timeout, null);
  }

  public JsonObject submit(String jobType, Object params) throws ApiException, TransportException {
    return submit(jobType, params, SubmitOptions.defaults());
  }

  /**
   * Submits a workflow (jobq's docs/workflows.md) and returns it as the API answers: its {@code status},
   * {@code counts}, {@code jobs} (each with {@code depends_on} and {@code blocked_parents}) and
   * {@code edges}. Each job is a {@code POST /v1/jobs} body ({@code job_key}, {@code job_type},
   * {@code params}, …) plus {@code depends_on}: the job_keys of its parents in the workflow, as strings
   * or {@code {"job_key": …, "on_parent_failure": "run"}}; a Map or a JsonObject, serialised with Gson.
   * All jobs are created or none; the same key and body again answer the existing workflow, a different
   * body is an {@link ApiException} 409, a broken rule (a cycle, an unknown parent) a 400 naming the
   * field.
   */
  public JsonObject submitWorkflow(String workflowKey, List<?> jobs) throws ApiException, TransportException {
    JsonObject body = new JsonObject();
    body.addProperty("workflow_key", workflowKey);
    body.add("jobs", GSON.toJsonTree(jobs));
    return call("POST", "/v1/workflows", body, timeout, null);
  }

  /** Returns the workflow with its jobs, edges and {@code status} ({@link ApiException} 404 when there is none). */
  public JsonObject getWorkflow(String workflowKey) throws ApiException, TransportException {
    String path = URLEncoder.encode(workflowKey, StandardCharsets.UTF_8).replace("+", "%20");
    return call("GET", "/v1/workflows/" + path, null, timeout, null);
  }

  public JsonObject getJob(long id) throws ApiException, TransportException {
    return call("GET", "/v1/jobs/" + id, null, timeout, null);
  }

  public JsonObject cancelJob(long id) throws ApiException, TransportException {
    return call("POST", "/v1/jobs/" + id + "/cancel", new JsonObject(), timeout, null);
  }

  /**
   * Long-polls for up to {@code maxJobs} due jobs. {@code onStart} receives the call's future: cancelling
   * it closes the connection, and the replica returns what it claimed for the call to WAITING.
   */
  public List<JsonObject> fetch(String workerId, List<String> jobTypes, int maxJobs, int waitMs,
      Map<String, String> labels, String version, Consumer<CompletableFuture<?>> onStart)
      throws ApiException, TransportException {
    JsonObject body = new JsonObject();
    body.addProperty("worker_id", workerId);
    body.add("job_types", GSON.toJsonTree(jobTypes));
    body.addProperty("max_jobs", maxJobs);
    body.addProperty("wait_ms", waitMs);
    if (labels != null && !labels.isEmpty()) body.add("labels", GSON.toJsonTree(labels));
    if (version != null) body.addProperty("version", version);
    JsonObject answer = call("POST", "/v1/workers/fetch", body, timeout.plusMillis(waitMs), onStart);
    List<JsonObject> jobs = new ArrayList<>();
    if (answer.has("jobs") && answer.get("jobs").isJsonArray()) {
      for (JsonElement e : answer.getAsJsonArray("jobs")) jobs.add(e.getAsJsonObject());
    }
    return jobs;
  }

  /** Renews the leases of these task tokens in one call; one result per token, in order. */
  public List<JsonObject> heartbeat(String workerId, List<String> taskTokens)
      throws ApiException, TransportException {
    JsonObject body = new JsonObject();
    body.addProperty("worker_id", workerId);
    body.add("task_tokens", GSON.toJsonTree(taskTokens));
    JsonObject answer = call("POST", "/v1/workers/heartbeat", body, timeout, null);
    List<JsonObject> results = new ArrayList<>();
    if (answer.has("results") && answer.get("results").isJsonArray()) {
      for (JsonElement e : answer.getAsJsonArray("results")) results.add(e.getAsJsonObject());
    }
    return results;
  }

  /** Sends one completion body ({@code task_token}, {@code outcome} and its fields) once. */
  public JsonObject complete(JsonObject body) throws ApiException, TransportException {
    return call("POST", "/v1/workers/complete", body, timeout, null);
  }

  public void appendLog(String taskToken, List<String> lines) throws ApiException, TransportException {
    JsonObject body = new JsonObject();
    body.addProperty("task_token", taskToken);
    JsonArray arr = new JsonArray();
    lines.forEach(arr::add);
    body.add("lines", arr);
    call("POST", "/v1/workers/log", body, timeout, null);
  }

  public void reportProgress(String taskToken, double progress, String message)
      throws ApiException, TransportException {
    JsonObject body = new JsonObject();
    body.addProperty("task_token", taskToken);
    body.addProperty("progress", progress);
    body.addProperty("message", message == null ? "" : message);
    call("POST", "/v1/workers/progress", body, timeout, null);
  }

  /** Sends one request and returns the decoded JSON object. */
  public JsonObject call(String method, String path, JsonElement body, Duration callTimeout,
      Consumer<CompletableFuture<?>> onStart) throws ApiException, TransportException {
    HttpRequest.Builder req = HttpRequest.newBuilder(URI.create(base + path))
        .timeout(callTimeout)
        .header("Accept", "application/json");
    if (token != null) req.header("Authorization", "Bearer " + token);
    if (body != null) {
      req.header("Content-Type", "application/json");
      req.method(method, HttpRequest.BodyPublishers.ofString(GSON.toJson(body)));
    } else {
      req.method(method, HttpRequest.BodyPublishers.noBody());
    }
    HttpResponse<String> res;
    CompletableFuture<HttpResponse<String>> future = http.sendAsync(req.build(), HttpResponse.BodyHandlers.ofString());
    if (onStart != null) onStart.accept(future);
    try {
      res = future.get();
    } catch (InterruptedException e) {
      future.cancel(true);
      Thread.currentThread().interrupt();
      throw new TransportException(method + " " + path + ": interrupted", e);
    } catch (CancellationException e) {
      throw new TransportException(method + " " + path + ": aborted", e);
    } catch (ExecutionException e) {
      Throwable cause = e.getCause();
      throw new TransportException(method + " " + path + ": " + cause, cause);
    }
    JsonElement decoded = null;
    try {
      decoded = res.body().isEmpty() ? new JsonObject() : JsonParser.parseString(res.body());
    } catch (RuntimeException e) {
      // not JSON: reported below
    }
    int status = res.statusCode();
    boolean ok = status >= 200 && status < 300;
    if (ok && decoded != null && decoded.isJsonObject()) return decoded.getAsJsonObject();
    if (ok) throw new ApiException(status, "bad_answer", "", method + " " + path + ": answer is not a JSON object");
    if (decoded != null && decoded.isJsonObject() && decoded.getAsJsonObject().has("error")
        && decoded.getAsJsonObject().get("error").isJsonObject()) {
      JsonObject err = decoded.getAsJsonObject().getAsJsonObject("error");
      throw new ApiException(status, str(err, "code"), str(err, "field"), str(err, "message"));
    }
    String text = res.body().length() > 200 ? res.body().substring(0, 200) : res.body();
    throw new ApiException(status, "http_" + status, "", text.strip());
  }

  private static String str(JsonObject o, String name) {
    JsonElement e = o.get(name);
    return e == null || e.isJsonNull() ? "" : e.getAsString();
  }

  static Gson gson() {
    return GSON;
  }

}
