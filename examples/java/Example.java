import java.util.List;

/**
 * Adds a session, searches it, reads prompt context, and shows an error code.
 *
 * <pre>
 *   javac -d /tmp/gr-java examples/java/*.java
 *   java -cp /tmp/gr-java Example http://127.0.0.1:8420 "$GRAPHRECALL_API_KEY" [org] [user]
 * </pre>
 */
public final class Example {
    public static void main(String[] args) {
        String url = args.length > 0 ? args[0] : System.getenv().getOrDefault("GRAPHRECALL_URL", "http://127.0.0.1:8420");
        String key = args.length > 1 && !args[1].isEmpty() ? args[1] : System.getenv("GRAPHRECALL_API_KEY");
        String org = args.length > 2 ? args[2] : "acme";
        String user = args.length > 3 ? args[3] : "java-demo";
        GraphRecallClient client = new GraphRecallClient(url, key);

        String added = client.addSession(org, user, "move-1", "2024-03-02T18:30:00Z", List.of(
                new GraphRecallClient.Message("user",
                        "We're moving to Zürich in September — my \"new\" office is near the lake.\nAny tips?"),
                new GraphRecallClient.Message("assistant", "Get a Halbtax card for the trains.")));
        System.out.println("added: " + added);
        System.out.println("messages_added=" + GraphRecallClient.Json.numberField(added, "messages_added").intValue());

        String hits = client.search(org, user, "Where is the user moving?", 3);
        System.out.println("search: " + hits);
        List<String> sessions = GraphRecallClient.Json.stringFields(hits, "session_id");
        System.out.println("hits=" + sessions.size());
        System.out.println("top_session=" + (sessions.isEmpty() ? "-" : sessions.get(0)));

        String context = client.context(org, user, "moving office", 500);
        String text = GraphRecallClient.Json.stringField(context, "text");
        System.out.println("context_tokens=" + GraphRecallClient.Json.numberField(context, "token_count").intValue());
        System.out.println("context_text_begin");
        System.out.println(text);
        System.out.println("context_text_end");

        try {
            client.search(org, user, "anything", 0); // k must be at least 1
            System.out.println("error_code=none");
        } catch (GraphRecallClient.GraphRecallException e) {
            System.out.println("error_code=" + e.code() + " status=" + e.status() + " field=" + e.field());
        }
    }
}
