// The Java Admin client's alterReplicaLogDirs and describeReplicaLogDirs against one
// replica, for tests/cluster_log_dirs.rs (run in source-file mode: `java -cp 'libs/*'
// LogDirsAdmin.java BOOTSTRAP TOPIC PARTITION BROKER DIR...`). Prints one line per
// requested move, `alter DIR ok` or `alter DIR error EXCEPTION`, then
// `current DIR future DIR` from describeReplicaLogDirs.

import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.DescribeReplicaLogDirsResult.ReplicaLogDirInfo;
import org.apache.kafka.common.TopicPartitionReplica;

public class LogDirsAdmin {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("request.timeout.ms", "20000");
        TopicPartitionReplica replica = new TopicPartitionReplica(
                args[1], Integer.parseInt(args[2]), Integer.parseInt(args[3]));
        try (Admin admin = Admin.create(props)) {
            for (int i = 4; i < args.length; i++) {
                try {
                    admin.alterReplicaLogDirs(Map.of(replica, args[i])).all().get();
                    System.out.println("alter " + args[i] + " ok");
                } catch (ExecutionException e) {
                    System.out.println("alter " + args[i] + " error "
                            + e.getCause().getClass().getSimpleName());
                }
            }
            ReplicaLogDirInfo info =
                    admin.describeReplicaLogDirs(List.of(replica)).all().get().get(replica);
            System.out.println("current " + info.getCurrentReplicaLogDir()
                    + " future " + info.getFutureReplicaLogDir());
        }
    }
}
