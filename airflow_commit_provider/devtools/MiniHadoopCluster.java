// Hadoop's own MiniDFSCluster (1 DataNode) and MiniYARNCluster (1 NodeManager), and a second
// NodeManager on 127.0.0.2, in one JVM, for the tests. Run by devtools/hadoop_cluster.py (HadoopCluster) in a private working directory with
// `java -cp <jars> MiniHadoopCluster.java <conf dir> <key=value>...`: the settings go into both
// clusters' Configuration; the client configuration (core-site, hdfs-site, yarn-site) is written to
// <conf dir>; then the one line on stdout, "ready", says Hadoop itself reported both up (the
// NameNode out of safe mode with its DataNode registered, the ResourceManager with a RUNNING
// NodeManager). `mapred minicluster` cannot stand in: its MapReduce cluster needs jars the shaded
// minicluster jar leaves out. Every server listens on 127.0.0.1 (Mini*Cluster's own addresses),
// so the client configuration says 127.0.0.1 rather than "localhost": one spelling of the
// filesystem's authority, or Hadoop refuses paths as a "Wrong FS". MiniYARNCluster puts all its
// NodeManagers on "localhost", one host to Spark, which never runs a speculative copy of a task on
// a host where an attempt of it runs: the second NodeManager, a host of its own (127.0.0.2, also
// loopback), has room for one small container (SECOND_NODE_MB) and so never takes an application
// master of more than 1 GB. It stops (YARN, then HDFS) on
// SIGTERM and when its stdin closes, i.e. when the Python process that started it is gone; a
// failed start exits at once (status 1, the stack trace on stderr).
import java.io.File;
import java.io.FileOutputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.net.InetSocketAddress;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.yarn.conf.YarnConfiguration;
import org.apache.hadoop.yarn.server.MiniYARNCluster;
import org.apache.hadoop.yarn.server.nodemanager.NodeManager;
import org.apache.hadoop.yarn.server.resourcemanager.ClusterMetrics;

public class MiniHadoopCluster {
  /** The second NodeManager's address: another host to Spark, on loopback. */
  private static final String SECOND_NODE_HOST = "127.0.0.2";
  /** Its memory: one executor's container (512m and Spark's 384m overhead, rounded to 1024). */
  private static final int SECOND_NODE_MB = 1024;
  /** How long the NodeManagers may take to register with the ResourceManager. */
  private static final long NODES_BOUND_MS = 120_000;

  public static void main(String[] args) {
    PrintStream stdout = System.out;
    System.setOut(System.err); // Log4j's default console is stdout: only the "ready" line goes there
    try {
      run(args, stdout);
    } catch (Throwable error) { // HDFS's threads would keep a failed start's JVM alive
      error.printStackTrace();
      System.exit(1);
    }
  }

  private static void run(String[] args, PrintStream stdout) throws Exception {
    File confDir = new File(args[0]);
    Configuration conf = new YarnConfiguration();
    for (int i = 1; i < args.length; i++) {
      String[] setting = args[i].split("=", 2);
      conf.set(setting[0], setting[1]);
    }
    MiniDFSCluster dfs =
        new MiniDFSCluster.Builder(conf, new File("dfs")).numDataNodes(1).build();
    MiniYARNCluster yarn = new MiniYARNCluster("yarn", 1, 1, 1);
    NodeManager second = new NodeManager();
    Runtime.getRuntime()
        .addShutdownHook(
            new Thread(
                () -> {
                  second.stop();
                  yarn.stop();
                  dfs.shutdown();
                }));
    dfs.waitActive();
    conf.set("fs.defaultFS", "hdfs://127.0.0.1:" + dfs.getNameNodePort());
    yarn.init(conf);
    yarn.start();
    if (!yarn.waitForNodeManagersToConnect(NODES_BOUND_MS)) {
      System.err.println("MiniHadoopCluster: no NodeManager reached RUNNING within 120 s");
      System.exit(1);
    }
    Configuration running = yarn.getConfig();
    second.init(secondNodeConf(running, new File("data", "yarn-" + SECOND_NODE_HOST).getAbsoluteFile()));
    second.start();
    if (!waitForActiveNodes(2)) {
      System.err.println("MiniHadoopCluster: the NodeManager on " + SECOND_NODE_HOST + " is not active");
      System.exit(1);
    }
    InetSocketAddress http = dfs.getNameNode().getHttpAddress();
    write(confDir, "core-site.xml", "fs.defaultFS", conf.get("fs.defaultFS"));
    write(
        confDir,
        "hdfs-site.xml",
        "dfs.replication", "1",
        "dfs.namenode.rpc-address", "127.0.0.1:" + dfs.getNameNodePort(),
        "dfs.namenode.http-address", "127.0.0.1:" + http.getPort());
    write(
        confDir,
        "yarn-site.xml",
        "yarn.resourcemanager.address", loopback(running, YarnConfiguration.RM_ADDRESS),
        "yarn.resourcemanager.scheduler.address",
            loopback(running, YarnConfiguration.RM_SCHEDULER_ADDRESS),
        "yarn.resourcemanager.resource-tracker.address",
            loopback(running, YarnConfiguration.RM_RESOURCE_TRACKER_ADDRESS),
        "yarn.resourcemanager.admin.address", loopback(running, YarnConfiguration.RM_ADMIN_ADDRESS),
        "yarn.resourcemanager.webapp.address",
            loopback(running, YarnConfiguration.RM_WEBAPP_ADDRESS));
    stdout.println("ready");
    stdout.flush();
    while (System.in.read() != -1) {
      // Nothing is sent: the stream's end means the starting process is gone.
    }
    System.exit(0);
  }

  /** The second NodeManager's settings: the cluster's, with its own addresses, dirs and memory. */
  private static Configuration secondNodeConf(Configuration running, File dir) {
    Configuration nm = new YarnConfiguration(running);
    for (String key :
        new String[] {
          YarnConfiguration.NM_ADDRESS,
          YarnConfiguration.NM_LOCALIZER_ADDRESS,
          YarnConfiguration.NM_WEBAPP_ADDRESS,
          YarnConfiguration.NM_COLLECTOR_SERVICE_ADDRESS
        }) {
      nm.set(key, SECOND_NODE_HOST + ":0");
    }
    nm.set(YarnConfiguration.NM_LOCAL_DIRS, new File(dir, "local").getPath());
    nm.set(YarnConfiguration.NM_LOG_DIRS, new File(dir, "logs").getPath());
    nm.setInt(YarnConfiguration.NM_PMEM_MB, SECOND_NODE_MB);
    nm.setBoolean(YarnConfiguration.NM_ENABLE_HARDWARE_CAPABILITY_DETECTION, false);
    return nm;
  }

  /** Whether the ResourceManager counts `count` active NodeManagers within NODES_BOUND_MS (its
   * metric, polled as MiniYARNCluster.waitForNodeManagersToConnect polls). */
  private static boolean waitForActiveNodes(int count) throws InterruptedException {
    long deadline = System.currentTimeMillis() + NODES_BOUND_MS;
    while (ClusterMetrics.getMetrics().getNumActiveNMs() < count) {
      if (System.currentTimeMillis() > deadline) {
        return false;
      }
      Thread.sleep(100);
    }
    return true;
  }

  /** The port of the address the running cluster set at `key`, on 127.0.0.1. */
  private static String loopback(Configuration running, String key) {
    String address = running.get(key);
    return "127.0.0.1:" + address.substring(address.lastIndexOf(':') + 1);
  }

  private static void write(File confDir, String name, String... keysAndValues) throws Exception {
    Configuration site = new Configuration(false);
    for (int i = 0; i < keysAndValues.length; i += 2) {
      site.set(keysAndValues[i], keysAndValues[i + 1]);
    }
    try (OutputStream out = new FileOutputStream(new File(confDir, name))) {
      site.writeXml(out);
    }
  }
}
