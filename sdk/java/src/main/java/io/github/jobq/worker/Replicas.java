package io.github.jobq.worker;

import java.lang.System.Logger.Level;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;

/**
 * The replicas a worker talks to: one at a time, starting with the first, moving to the next one
 * (round robin) when a call gets no answer or a 5xx answer. The failed call is not repeated here:
 * the caller's retry goes to the next replica. Task tokens are checked in the database, so any
 * replica takes the heartbeats, logs and completions of a job another one handed out.
 */
final class Replicas {
  private static final System.Logger LOG = System.getLogger("jobq.worker");
  private final List<Client> clients;
  private final List<String> urls;
  private final AtomicInteger cur = new AtomicInteger(); // index into clients of the replica in use

  /** One call of a Client method. */
  interface Call<T> {
    T on(Client c) throws ApiException, TransportException;
  }

  Replicas(List<Client> clients, List<String> urls) {
    this.clients = List.copyOf(clients);
    this.urls = List.copyOf(urls);
  }

  List<String> urls() {
    return urls;
  }

  <T> T call(Call<T> f) throws ApiException, TransportException {
    return call(f, () -> false);
  }

  /** Makes the call on the replica in use; {@code aborted} tells a call the worker ended itself. */
  <T> T call(Call<T> f, BooleanSupplier aborted) throws ApiException, TransportException {
    int i = cur.get();
    try {
      return f.on(clients.get(i));
    } catch (ApiException e) {
      if (e.isRetryable()) next(i, e, aborted);
      throw e;
    } catch (TransportException e) {
      next(i, e, aborted);
      throw e;
    }
  }

  private void next(int i, Exception e, BooleanSupplier aborted) {
    if (clients.size() == 1 || aborted.getAsBoolean()) return;
    int n = (i + 1) % clients.size();
    if (cur.compareAndSet(i, n)) {
      LOG.log(Level.WARNING, "replica {0} unreachable; moving to {1}: {2}", urls.get(i), urls.get(n), e.getMessage());
    }
  }
}
