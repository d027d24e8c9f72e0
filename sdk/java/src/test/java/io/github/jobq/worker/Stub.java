package io.github.jobq.worker;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.function.Predicate;

/**
 * A scripted HTTP endpoint for the answers a replica gives only under faults (503, 413, lost
 * leases): each path answers from a queue, the last answer repeating, and every body is recorded.
 */
final class Stub implements AutoCloseable {
  record Answer(int status, String body, long delayMs) {}

  record Request(String path, JsonElement body) {}

  private final HttpServer server;
  private final Map<String, List<Answer>> answers = new HashMap<>();
  private final List<Request> requests = new ArrayList<>();

  Stub() throws IOException {
    server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
    server.setExecutor(Executors.newCachedThreadPool());
    server.createContext("/", ex -> {
      String raw = new String(ex.getRequestBody().readAllBytes(), StandardCharsets.UTF_8);
      String path = ex.getRequestURI().getPath();
      Answer a;
      synchronized (this) {
        requests.add(new Request(path, raw.isEmpty() ? null : JsonParser.parseString(raw)));
        List<Answer> q = answers.getOrDefault(path, List.of(new Answer(200, "{}", 0)));
        a = q.size() > 1 ? q.remove(0) : q.get(0);
        notifyAll();
      }
      try {
        if (a.delayMs() > 0) Thread.sleep(a.delayMs());
        byte[] out = a.body().getBytes(StandardCharsets.UTF_8);
        ex.getResponseHeaders().set("Content-Type", "application/json");
        ex.sendResponseHeaders(a.status(), out.length);
        try (OutputStream os = ex.getResponseBody()) {
          os.write(out);
        }
      } catch (IOException | InterruptedException e) {
        // the worker closed a long poll it no longer waits for
      } finally {
        ex.close();
      }
    });
    server.start();
  }

  String url() {
    return "http://127.0.0.1:" + server.getAddress().getPort();
  }

  synchronized void script(String path, Answer... list) {
    answers.put(path, new ArrayList<>(List.of(list)));
  }

  synchronized List<JsonObject> bodies(String path) {
    return requests.stream().filter(r -> r.path().equals(path)).map(r -> r.body().getAsJsonObject()).toList();
  }

  synchronized boolean waitFor(Predicate<List<Request>> pred, long timeoutMs) throws InterruptedException {
    long end = System.currentTimeMillis() + timeoutMs;
    while (!pred.test(requests)) {
      long left = end - System.currentTimeMillis();
      if (left <= 0) return false;
      wait(left);
    }
    return true;
  }

  static Predicate<List<Request>> count(String path, int n) {
    return rs -> rs.stream().filter(r -> r.path().equals(path)).count() >= n;
  }

  static String job(long id, long heartbeatMs) {
    return "{\"id\":" + id + ",\"job_key\":\"k" + id + "\",\"job_type\":\"t\",\"params\":{},\"attempt\":1,"
        + "\"lease_ms\":30000,\"heartbeat_ms\":" + heartbeatMs + ",\"task_token\":\"jqt1." + id + ".1.secret\"}";
  }

  static Answer jobs(String... jobs) {
    return new Answer(200, "{\"jobs\":[" + String.join(",", jobs) + "]}", 0);
  }

  static Answer idle() {
    return new Answer(200, "{\"jobs\":[]}", 50);
  }

  static Answer of(int status, String body) {
    return new Answer(status, body, 0);
  }

  @Override
  public void close() {
    server.stop(0);
  }
}
